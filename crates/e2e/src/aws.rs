//! A load balancer in moto's ELBv2 API for the ALB verification tests, set up as the AWS
//! Load Balancer Controller sets one up for the corpus' ALB canary (`alb-canary-ingress`
//! routing to `alb-canary-desired` and `alb-canary-stable` on port 80); the test plays that
//! controller and changes the listener's weights and the registered targets when it chooses.

use sluice_aws::aws_credential_types::Credentials;
use sluice_aws::elbv2;
use sluice_aws::elbv2::types::{
    Action, ActionTypeEnum, ForwardActionConfig, ProtocolEnum, Tag, TargetDescription,
    TargetGroupTuple, TargetTypeEnum,
};
use sluice_testenv::harness::{TestEnv, TestNamespace};
use sluice_testenv::moto::{Moto, REGION};

const INGRESS: &str = "alb-canary-ingress";
const CANARY: &str = "alb-canary-desired";
const STABLE: &str = "alb-canary-stable";

/// The load balancer of the test, as AWS knows it.
pub struct Aws {
    pub elb: elbv2::Client,
    pub dns_name: String,
    pub listener: String,
    pub canary_group: String,
    pub stable_group: String,
}

impl Aws {
    /// A load balancer with the canary and stable target groups of `namespace`'s Ingress, all
    /// traffic on stable.
    pub async fn create(moto: &Moto, namespace: &str) -> Aws {
        let config = sluice_aws::loader()
            .endpoint_url(moto.endpoint())
            .region(elbv2::config::Region::new(REGION))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "e2e"))
            .load()
            .await;
        assert!(
            sluice_aws::set_sdk_config(config.clone()),
            "AWS configured once"
        );
        let elb = elbv2::Client::new(&config);
        // moto's default VPC has a subnet per zone; a load balancer needs two.
        let subnets = moto
            .query(
                "ec2",
                &[("Action", "DescribeSubnets"), ("Version", "2016-11-15")],
            )
            .await
            .expect("subnets");
        let ids = xml_values(&subnets, "subnetId");
        let vpc = xml_values(&subnets, "vpcId").remove(0);
        let lb = elb
            .create_load_balancer()
            .name("sluice-e2e")
            .set_subnets(Some(ids[..2].to_vec()))
            .send()
            .await
            .expect("load balancer");
        let lb = &lb.load_balancers()[0];
        let mut groups = Vec::new();
        for (name, service) in [("canary", CANARY), ("stable", STABLE)] {
            let tg = elb
                .create_target_group()
                .name(name)
                .protocol(ProtocolEnum::Http)
                .port(80)
                .vpc_id(&vpc)
                .target_type(TargetTypeEnum::Ip)
                .send()
                .await
                .expect("target group");
            let arn = tg.target_groups()[0]
                .target_group_arn()
                .unwrap()
                .to_string();
            elb.add_tags()
                .resource_arns(&arn)
                .tags(
                    Tag::builder()
                        .key("ingress.k8s.aws/resource")
                        .value(format!("{namespace}/{INGRESS}-{service}:80"))
                        .build(),
                )
                .send()
                .await
                .expect("tags");
            groups.push(arn);
        }
        let (canary_group, stable_group) = (groups[0].clone(), groups[1].clone());
        let listener = elb
            .create_listener()
            .load_balancer_arn(lb.load_balancer_arn().unwrap())
            .protocol(ProtocolEnum::Http)
            .port(80)
            .default_actions(forward(&canary_group, &stable_group, 0))
            .send()
            .await
            .expect("listener");
        Aws {
            dns_name: lb.dns_name().unwrap().to_string(),
            listener: listener.listeners()[0].listener_arn().unwrap().to_string(),
            elb,
            canary_group,
            stable_group,
        }
    }

    /// Gives the corpus Ingress this load balancer (as the AWS Load Balancer Controller does
    /// in the Ingress's status) and starts a controller verifying with AWS.
    pub async fn verifying_controller(
        &self,
        env: &TestEnv,
        ns: &TestNamespace,
    ) -> crate::RunningController {
        crate::routing::ingresses(ns)
            .patch_status(
                INGRESS,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"status": {"loadBalancer": {
                    "ingress": [{"hostname": self.dns_name}]}}})),
            )
            .await
            .expect("the Ingress's load balancer");
        let mut args = crate::controller_args(ns.name());
        args.aws_verify_target_group = true;
        crate::start_controller_with_args(env.client(), args)
    }

    /// What the load balancer controller does once it has applied the annotation: the
    /// listener forwards `canary` % to the canary group.
    pub async fn route(&self, canary: i32) {
        self.elb
            .modify_listener()
            .listener_arn(&self.listener)
            .default_actions(forward(&self.canary_group, &self.stable_group, canary))
            .send()
            .await
            .expect("listener weights");
    }

    /// What the load balancer controller does for a TargetGroupBinding: the pod `ip:port`
    /// registered in the stable group.
    pub async fn register_stable(&self, ip: &str, port: i32) {
        self.elb
            .register_targets()
            .target_group_arn(&self.stable_group)
            .targets(TargetDescription::builder().id(ip).port(port).build())
            .send()
            .await
            .expect("register targets");
    }
}

fn forward(canary_group: &str, stable_group: &str, canary: i32) -> Action {
    let tuple = |arn: &str, weight: i32| {
        TargetGroupTuple::builder()
            .target_group_arn(arn)
            .weight(weight)
            .build()
    };
    Action::builder()
        .r#type(ActionTypeEnum::Forward)
        .forward_config(
            ForwardActionConfig::builder()
                .target_groups(tuple(canary_group, canary))
                .target_groups(tuple(stable_group, 100 - canary))
                .build(),
        )
        .build()
}

/// The text of every `<tag>` element, in order.
fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split('<').next().map(str::to_string))
        .collect()
}
