//! The router objects Sluice reads and writes, and which API version of each it speaks. The
//! versions that differ between installations (Istio's, SMI's, Traefik's, Ambassador's, App
//! Mesh's) come from controller flags, with Argo's defaults. A kind whose API group differs
//! between releases of its project (Traefik, Ambassador) is two kinds here, so that a kind
//! always has one group.

/// A kind of router object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouterKind {
    VirtualService,
    DestinationRule,
    Ingress,
    TrafficSplit,
    HttpRoute,
    GrpcRoute,
    TcpRoute,
    TlsRoute,
    /// Traefik's `TraefikService`, group `traefik.io` (Traefik 3, Argo 1.10's default).
    TraefikService,
    /// The same in the older group `traefik.containo.us`.
    TraefikServiceContainous,
    /// Ambassador's `Mapping` in `getambassador.io`.
    AmbassadorMapping,
    /// Emissary's `AmbassadorMapping` in `x.getambassador.io`.
    AmbassadorXMapping,
    ApisixRoute,
    /// App Mesh's `VirtualService` (not Istio's).
    AppMeshVirtualService,
    AppMeshVirtualRouter,
    AppMeshVirtualNode,
    /// Not an API object: what a traffic-router plugin of `argo-rollouts-config` was last
    /// told for one Rollout (see `crate::rpc_plugin`). The controller keeps it and turns its
    /// writes into the plugin's calls; it is never read from or written to the API server,
    /// so it is not in [`RouterKind::ALL`].
    RpcPlugin,
    /// Not an API object: what AWS says of the load balancers of one ALB Ingress (named after
    /// it), read by the controller when `--aws-verify-target-group` is on (see
    /// `crate::alb::verify`). Read only, never written; not in [`RouterKind::ALL`].
    AwsLoadBalancer,
}

impl RouterKind {
    pub const ALL: [RouterKind; 16] = [
        RouterKind::VirtualService,
        RouterKind::DestinationRule,
        RouterKind::Ingress,
        RouterKind::TrafficSplit,
        RouterKind::HttpRoute,
        RouterKind::GrpcRoute,
        RouterKind::TcpRoute,
        RouterKind::TlsRoute,
        RouterKind::TraefikService,
        RouterKind::TraefikServiceContainous,
        RouterKind::AmbassadorMapping,
        RouterKind::AmbassadorXMapping,
        RouterKind::ApisixRoute,
        RouterKind::AppMeshVirtualService,
        RouterKind::AppMeshVirtualRouter,
        RouterKind::AppMeshVirtualNode,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            RouterKind::VirtualService => "VirtualService",
            RouterKind::DestinationRule => "DestinationRule",
            RouterKind::Ingress => "Ingress",
            RouterKind::TrafficSplit => "TrafficSplit",
            RouterKind::HttpRoute => "HTTPRoute",
            RouterKind::GrpcRoute => "GRPCRoute",
            RouterKind::TcpRoute => "TCPRoute",
            RouterKind::TlsRoute => "TLSRoute",
            RouterKind::TraefikService | RouterKind::TraefikServiceContainous => "TraefikService",
            RouterKind::AmbassadorMapping => "Mapping",
            RouterKind::AmbassadorXMapping => "AmbassadorMapping",
            RouterKind::ApisixRoute => "ApisixRoute",
            RouterKind::AppMeshVirtualService => "VirtualService",
            RouterKind::AppMeshVirtualRouter => "VirtualRouter",
            RouterKind::AppMeshVirtualNode => "VirtualNode",
            RouterKind::RpcPlugin => "TrafficRouterPlugin",
            RouterKind::AwsLoadBalancer => "AwsLoadBalancer",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            RouterKind::VirtualService | RouterKind::DestinationRule => "networking.istio.io",
            RouterKind::Ingress => "networking.k8s.io",
            RouterKind::TrafficSplit => "split.smi-spec.io",
            RouterKind::HttpRoute
            | RouterKind::GrpcRoute
            | RouterKind::TcpRoute
            | RouterKind::TlsRoute => "gateway.networking.k8s.io",
            RouterKind::TraefikService => "traefik.io",
            RouterKind::TraefikServiceContainous => "traefik.containo.us",
            RouterKind::AmbassadorMapping => "getambassador.io",
            RouterKind::AmbassadorXMapping => "x.getambassador.io",
            RouterKind::ApisixRoute => "apisix.apache.org",
            RouterKind::AppMeshVirtualService
            | RouterKind::AppMeshVirtualRouter
            | RouterKind::AppMeshVirtualNode => "appmesh.k8s.aws",
            RouterKind::RpcPlugin => "plugins.rollouts.sluice.dev",
            RouterKind::AwsLoadBalancer => "aws.rollouts.sluice.dev",
        }
    }

    /// The resource name in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            RouterKind::VirtualService => "virtualservices",
            RouterKind::DestinationRule => "destinationrules",
            RouterKind::Ingress => "ingresses",
            RouterKind::TrafficSplit => "trafficsplits",
            RouterKind::HttpRoute => "httproutes",
            RouterKind::GrpcRoute => "grpcroutes",
            RouterKind::TcpRoute => "tcproutes",
            RouterKind::TlsRoute => "tlsroutes",
            RouterKind::TraefikService | RouterKind::TraefikServiceContainous => "traefikservices",
            RouterKind::AmbassadorMapping => "mappings",
            RouterKind::AmbassadorXMapping => "ambassadormappings",
            RouterKind::ApisixRoute => "apisixroutes",
            RouterKind::AppMeshVirtualService => "virtualservices",
            RouterKind::AppMeshVirtualRouter => "virtualrouters",
            RouterKind::AppMeshVirtualNode => "virtualnodes",
            RouterKind::RpcPlugin => "trafficrouterplugins",
            RouterKind::AwsLoadBalancer => "awsloadbalancers",
        }
    }

    pub fn version(self, versions: &ApiVersions) -> &str {
        match self {
            RouterKind::VirtualService | RouterKind::DestinationRule => &versions.istio,
            RouterKind::Ingress => "v1",
            RouterKind::TrafficSplit => &versions.smi,
            RouterKind::HttpRoute | RouterKind::GrpcRoute => "v1",
            RouterKind::TcpRoute | RouterKind::TlsRoute => "v1alpha2",
            RouterKind::TraefikService | RouterKind::TraefikServiceContainous => "v1alpha1",
            RouterKind::AmbassadorMapping | RouterKind::AmbassadorXMapping => &versions.ambassador,
            RouterKind::ApisixRoute => "v2",
            RouterKind::AppMeshVirtualService
            | RouterKind::AppMeshVirtualRouter
            | RouterKind::AppMeshVirtualNode => &versions.appmesh,
            RouterKind::RpcPlugin | RouterKind::AwsLoadBalancer => "v1",
        }
    }

    /// `<group>/<version>`, as in an object's `apiVersion`.
    pub fn api_version(self, versions: &ApiVersions) -> String {
        format!("{}/{}", self.group(), self.version(versions))
    }
}

/// API versions that vary between installations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiVersions {
    /// `--istio-api-version`: `v1alpha3` unless told otherwise.
    pub istio: String,
    /// `--traffic-split-api-version`: `v1alpha1` unless told otherwise.
    pub smi: String,
    /// `--traefik-api-group`: `traefik.io` unless told otherwise (`traefik.containo.us` for
    /// Traefik 2).
    pub traefik_group: String,
    /// The version part of `--ambassador-api-version` (`getambassador.io/v2` unless told
    /// otherwise); its group picks the Mapping kind.
    pub ambassador: String,
    /// `true` when `--ambassador-api-version` names `x.getambassador.io` (Emissary's
    /// `AmbassadorMapping`).
    pub ambassador_x: bool,
    /// `--appmesh-crd-version`: `v1beta2` unless told otherwise.
    pub appmesh: String,
    /// Built-in plugin routers (`argoproj-labs/gatewayAPI`) that `argo-rollouts-config` points
    /// at a binary: the binary serves them.
    pub plugin_binaries: std::collections::BTreeSet<String>,
    /// `--aws-verify-target-group`: the ALB router checks with AWS that the load balancer
    /// routes the weights it wrote (off unless told).
    pub aws_verify_target_group: bool,
    /// `--alb-tag-key-resource-id`: the tag that names a target group's Kubernetes origin
    /// (`ingress.k8s.aws/resource` unless told otherwise).
    pub alb_tag_key_resource_id: String,
    /// `--aws-target-group-binding-api-version`: the AWS Load Balancer Controller's
    /// TargetGroupBinding API (`elbv2.k8s.aws/v1beta1` unless told otherwise).
    pub target_group_binding_api_version: String,
}

impl Default for ApiVersions {
    fn default() -> Self {
        Self {
            istio: "v1alpha3".into(),
            smi: "v1alpha1".into(),
            traefik_group: "traefik.io".into(),
            ambassador: "v2".into(),
            ambassador_x: false,
            appmesh: "v1beta2".into(),
            plugin_binaries: Default::default(),
            aws_verify_target_group: false,
            alb_tag_key_resource_id: "ingress.k8s.aws/resource".into(),
            target_group_binding_api_version: "elbv2.k8s.aws/v1beta1".into(),
        }
    }
}

impl ApiVersions {
    /// The TraefikService kind of the configured group.
    pub fn traefik_kind(&self) -> RouterKind {
        if self.traefik_group == "traefik.containo.us" {
            RouterKind::TraefikServiceContainous
        } else {
            RouterKind::TraefikService
        }
    }

    /// The Mapping kind of the configured Ambassador API.
    pub fn ambassador_kind(&self) -> RouterKind {
        if self.ambassador_x {
            RouterKind::AmbassadorXMapping
        } else {
            RouterKind::AmbassadorMapping
        }
    }
}

/// One router object, by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: RouterKind,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: RouterKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}
