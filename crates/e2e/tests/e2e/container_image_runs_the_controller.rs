//! The controller's container image, built from Debian's packages by `scripts/build-image.sh`
//! (from the debug binaries the tests build; reused while they are unchanged) and run by podman
//! the way the install manifests run it: user 65532, a read-only root filesystem with writable
//! `/tmp` and `plugin-bin` volumes, every capability dropped, no privilege escalation, the
//! runtime's default seccomp profile. On the local control plane it takes its Lease, answers
//! `/healthz`, `/readyz` and `/metrics`, carries a canary update through to Healthy, and runs
//! the update's step plugin through the plugin bridge inside the image, installed from
//! `argo-rollouts-config` into the working directory's `plugin-bin` as Argo's image does.
//! The same image, with `kubectl-sluice` as the entry point as manifests/dashboard runs it,
//! serves the shared dashboard's login page and refuses its API without a session.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;
use sluice_api::rollout::{RolloutPhase, StepPluginOperation, StepPluginPhase};
use sluice_e2e::harness::{TestEnv, TestNamespace, plugin_binaries, wait_for};
use sluice_e2e::process::{cli_binary, controller_binary};
use sluice_e2e::{TIMEOUT, canary_rollout, rollouts, set_image, wait_phase};

/// The tag the test builds; rebuilt only when a binary changed.
const IMAGE_TAG: &str = "sluice-controller:e2e";
/// The container's host name: the first part of the identity the controller leads under.
const HOSTNAME: &str = "sluice-image-e2e";
/// Where the container finds what the test mounts into it.
const KUBECONFIG: &str = "/etc/sluice/kubeconfig";
const PLUGIN: &str = "/plugins/step-plugin-e2e";
/// The image's working directory and the plugin folder under it (`--plugin-dir`'s default).
const PLUGIN_BIN: &str = "/home/argo-rollouts/plugin-bin";
const ROLLOUT: &str = "in-image";

/// Runs `podman` and returns its standard output.
fn podman(args: &[&str]) -> anyhow::Result<String> {
    run_in(Path::new("."), "podman", args)
        .context("running podman (scripts/build-image.sh installs it)")
}

/// Runs `program` with `args` in `dir`: its standard output.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    ensure!(
        out.status.success(),
        "{program} {} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `scripts/build-image.sh` with the given binaries: the image's name.
async fn build_image(controller: &Path, bridge: &Path, cli: &Path) -> anyhow::Result<String> {
    let root = sluice_testenv::harness::repo_root();
    let args = [
        "--controller".into(),
        controller.as_os_str().to_owned(),
        "--bridge".into(),
        bridge.as_os_str().to_owned(),
        "--cli".into(),
        cli.as_os_str().to_owned(),
        "--tag".into(),
        IMAGE_TAG.into(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg(root.join("scripts/build-image.sh"))
            .args(args)
            .current_dir(&root)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
    })
    .await??;
    ensure!(
        out.status.success(),
        "scripts/build-image.sh failed ({})",
        out.status
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Two ports free on this machine (the container shares its network).
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// A running container; its log kept in `.dev/logs/` and the container removed when dropped,
/// a failed test included.
struct Container {
    name: String,
    log: PathBuf,
    scratch: PathBuf,
}

impl Container {
    fn new(env: &TestEnv, ns: &TestNamespace) -> anyhow::Result<Container> {
        let name = format!("sluice-{}", ns.name());
        let logs = env.repo_root().join(".dev/logs");
        std::fs::create_dir_all(&logs)?;
        let scratch = std::env::temp_dir().join(&name);
        // Private to this user: it holds a copy of the admin kubeconfig.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        Ok(Container {
            log: logs.join(format!("{name}.log")),
            name,
            scratch,
        })
    }

    /// Starts the image with the admin kubeconfig, watching the test's namespace only, with
    /// `plugin` mounted where `argo-rollouts-config` says.
    fn run(
        &self,
        env: &TestEnv,
        ns: &TestNamespace,
        image: &str,
        plugin: &Path,
        ports: (u16, u16),
    ) -> anyhow::Result<()> {
        // The container's user is not this one: it reads a copy, through the mount only (the
        // folder around it stays private).
        let kubeconfig = self.scratch.join("kubeconfig");
        std::fs::copy(env.kubeconfig_path(), &kubeconfig)?;
        std::fs::set_permissions(&kubeconfig, PermissionsExt::from_mode(0o644))?;
        let (healthz, metrics) = (ports.0.to_string(), ports.1.to_string());
        let kubeconfig_mount = format!("{}:{KUBECONFIG}:ro", kubeconfig.display());
        let plugin_mount = format!("{}:{PLUGIN}:ro", plugin.display());
        let pod_namespace = format!("POD_NAMESPACE={}", ns.name());
        // The emptyDir volumes of manifests/install/deployment.yaml, made as the kubelet makes
        // them: an empty folder of the host, mode 0777, bound in. (A tmpfs would not do:
        // runc gives it the mode of the image's folder it covers.)
        let mut volumes = Vec::new();
        for (dir, target) in [("tmp", "/tmp"), ("plugin-bin", PLUGIN_BIN)] {
            let host = self.scratch.join(dir);
            std::fs::create_dir(&host)?;
            std::fs::set_permissions(&host, PermissionsExt::from_mode(0o777))?;
            volumes.push(format!("{}:{target}:rw", host.display()));
        }
        #[rustfmt::skip]
        let args = [
            // crun, podman's default runtime on Debian, refuses a hybrid cgroup layout with a
            // controller left on cgroup v2 (hugetlb, often); runc runs on v1, hybrid and v2.
            "--runtime", "runc",
            "run", "--detach", "--name", &self.name, "--hostname", HOSTNAME,
            "--network", "host",
            "--user", "65532:65532", "--read-only",
            "--cap-drop", "all", "--security-opt", "no-new-privileges",
            "--volume", &volumes[0], "--volume", &volumes[1],
            // podman's defaults (a million files, four million processes) are above the hard
            // limits of a root without CAP_SYS_RESOURCE (in a container or a confined VM),
            // which cannot raise them; the controller needs far fewer.
            "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
            "--volume", &kubeconfig_mount, "--volume", &plugin_mount,
            "--env", &pod_namespace,
            image,
            "--kubeconfig", KUBECONFIG, "--namespaced", "--namespace", ns.name(),
            "--healthzPort", &healthz, "--metricsPort", &metrics,
            "--rollout-resync", "30",
        ];
        podman(&args)?;
        Ok(())
    }

    /// `podman top`: user, effective capabilities, seccomp mode and command line of each of the
    /// container's processes.
    fn processes(&self) -> anyhow::Result<Vec<(String, String, String, String)>> {
        let out = podman(&["top", &self.name, "user", "capeff", "seccomp", "args"])?;
        Ok(out
            .lines()
            .skip(1)
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let (user, caps, seccomp) = (words.next()?, words.next()?, words.next()?);
                let args = words.collect::<Vec<_>>().join(" ");
                Some((user.into(), caps.into(), seccomp.into(), args))
            })
            .collect())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("podman").args(["logs", &self.name]).output() {
            let log = [out.stdout, out.stderr].concat();
            std::fs::write(&self.log, &log).ok();
            if std::thread::panicking() {
                let text = String::from_utf8_lossy(&log);
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("the container's log ({}), its end:", self.log.display());
                tail.iter().rev().for_each(|line| eprintln!("  {line}"));
            }
        }
        let _ = Command::new("podman")
            .args(["rm", "--force", "--time", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        std::fs::remove_dir_all(&self.scratch).ok();
    }
}

async fn get(url: &str) -> anyhow::Result<String> {
    let response = reqwest::get(url).await?;
    let status = response.status();
    let body = response.text().await?;
    ensure!(status.is_success(), "{url}: {status} {body}");
    Ok(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_leads_rolls_out_and_runs_a_step_plugin_as_installed() {
    sluice_controller::install_crypto_provider();
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "image").await.unwrap();
    let bin = plugin_binaries().await.unwrap();
    let controller = controller_binary().await.unwrap();
    let cli = cli_binary().await.unwrap();
    let image = build_image(&controller, &bin.join("sluice-plugin-bridge"), &cli)
        .await
        .unwrap();
    // The Dockerfile's settings, which a cluster runs the image with (the test sets the user
    // again, as runAsNonRoot needs a number).
    let config: serde_json::Value = serde_json::from_str(
        &podman(&["image", "inspect", "--format", "{{json .Config}}", &image]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            &config["User"],
            &config["Entrypoint"],
            &config["ExposedPorts"],
            &config["WorkingDir"]
        ),
        (
            &json!("65532:65532"),
            &json!(["/usr/local/bin/sluice-controller"]),
            &json!({"8080/tcp": {}, "8090/tcp": {}}),
            &json!("/home/argo-rollouts")
        ),
        "{config:#}"
    );

    // Argo's e2e step plugin, from the file mounted into the container.
    ns.apply_yaml(&format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: argo-rollouts-config
data:
  stepPlugins: |-
    - name: "step/e2e-test"
      location: "file://{PLUGIN}"
"#
    ))
    .await
    .unwrap();
    let container = Container::new(&env, &ns).unwrap();
    let ports = free_ports();
    container
        .run(&env, &ns, &image, &bin.join("step-plugin-e2e"), ports)
        .unwrap();
    let healthz = format!("http://127.0.0.1:{}/healthz", ports.0);
    let readyz = format!("http://127.0.0.1:{}/readyz", ports.0);
    let metrics = format!("http://127.0.0.1:{}/metrics", ports.1);

    // Alive, then ready once its caches have synced.
    wait_for("/healthz", TIMEOUT, || get(&healthz))
        .await
        .unwrap();
    wait_for("/readyz", TIMEOUT, || get(&readyz)).await.unwrap();

    // Leading under Argo's Lease in its pod's namespace, as <host name>_<uuid>.
    let leases = ns.api::<Lease>();
    let holder = wait_for("the controller's Lease", TIMEOUT, || async {
        let lease = leases.get("argo-rollouts-controller-lock").await?;
        let holder = lease
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        ensure!(
            holder.starts_with(&format!("{HOSTNAME}_")),
            "held by {holder:?}"
        );
        Ok(holder)
    })
    .await
    .unwrap();
    assert!(holder.len() > HOSTNAME.len() + 1, "{holder}");

    // Every process of the container runs as the image's user, with no capability, under
    // seccomp.
    let processes = container.processes().unwrap();
    assert!(
        processes
            .iter()
            .any(|p| p.3.starts_with("/usr/local/bin/sluice-controller ")),
        "{processes:?}"
    );
    for (user, caps, seccomp, args) in &processes {
        assert_eq!(
            (user.as_str(), caps.as_str(), seccomp.as_str()),
            ("sluice", "none", "filter"),
            "{args}"
        );
    }

    // A canary update whose first step is the plugin's.
    let steps = json!([
        {"plugin": {"name": "step/e2e-test", "config": {"return": "Successful"}}},
        {"setWeight": 50},
        {"pause": {"duration": "1s"}}
    ]);
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        ROLLOUT,
        2,
        "nginx:1.19-alpine",
        steps,
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, ROLLOUT, "nginx:1.20-alpine").await;
    let ro = wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.clone().unwrap_or_default();
    assert_eq!(status.stable_rs, status.current_pod_hash, "{status:?}");
    assert_eq!(status.current_step_index, Some(3), "{status:?}");
    let plugin_steps = status
        .canary
        .and_then(|c| c.step_plugin_statuses)
        .unwrap_or_default();
    assert!(
        plugin_steps.iter().any(|s| s.index == Some(0)
            && s.name.as_deref() == Some("step/e2e-test")
            && s.operation == Some(StepPluginOperation::Run)
            && s.phase == Some(StepPluginPhase::Successful)),
        "{plugin_steps:#?}"
    );

    // The step ran through the image's bridge, from the copy installed in plugin-bin.
    let installed = format!("{PLUGIN_BIN}/step/e2e-test");
    let processes = container.processes().unwrap();
    let runs = |prefix: &str| processes.iter().any(|p| p.3.starts_with(prefix));
    assert!(
        runs("/usr/local/bin/sluice-plugin-bridge ") && runs(&installed),
        "{processes:#?}"
    );

    // The Rollout's metrics: its update Completed, Argo's phase of the metric.
    wait_for("the Rollout's metrics", TIMEOUT, || async {
        let body = get(&metrics).await?;
        let line = body
            .lines()
            .find(|l| l.starts_with("rollout_info{") && l.contains(&format!("name=\"{ROLLOUT}\"")));
        match line {
            Some(line) if line.contains("phase=\"Completed\"") => Ok(()),
            Some(line) => bail!("{line}"),
            None => bail!("no rollout_info for {ROLLOUT}"),
        }
    })
    .await
    .unwrap();

    // Still the first run of the container: nothing crashed on the way.
    let state = podman(&[
        "inspect",
        "--format",
        "{{.State.Running}} {{.RestartCount}} {{.HostConfig.ReadonlyRootfs}}",
        &container.name,
    ])
    .unwrap();
    assert_eq!(state.trim(), "true 0 true");

    // The shared dashboard from the same image, as manifests/dashboard runs it: non-root, on a
    // read-only root filesystem, with logins.
    let port = free_ports().0;
    let dashboard = format!("{}-dashboard", container.name);
    let kubeconfig_mount = format!(
        "{}:{KUBECONFIG}:ro",
        container.scratch.join("kubeconfig").display()
    );
    let port_arg = port.to_string();
    #[rustfmt::skip]
    let args = [
        "--runtime", "runc",
        "run", "--detach", "--name", &dashboard, "--network", "host",
        "--user", "65532:65532", "--read-only",
        "--cap-drop", "all", "--security-opt", "no-new-privileges",
        "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
        "--volume", &kubeconfig_mount,
        "--entrypoint", "/usr/local/bin/kubectl-sluice",
        &image,
        "--kubeconfig", KUBECONFIG, "-n", ns.name(), "dashboard",
        "--port", &port_arg, "--login", "token",
    ];
    podman(&args).unwrap();
    let login_page = format!("http://127.0.0.1:{port}/login");
    let served = wait_for("the dashboard's login page", TIMEOUT, || get(&login_page)).await;
    let refused = reqwest::get(format!(
        "http://127.0.0.1:{port}/api/v1/rollouts/{}/info",
        ns.name()
    ))
    .await;
    let logs = podman(&["logs", &dashboard]).unwrap_or_default();
    let _ = podman(&["rm", "--force", "--time", "0", &dashboard]);
    let page = served.unwrap_or_else(|e| panic!("{e:#}; its log: {logs}"));
    assert!(page.contains("Kubernetes token"), "{page}");
    assert_eq!(refused.unwrap().status(), reqwest::StatusCode::UNAUTHORIZED);
}

/// `make release` (`scripts/release.sh`, here with the debug binaries): every artifact is
/// written, `sha256sum -c` checks them all, the binaries run and tell the version, the chart
/// is the one under charts/, the manifests are the committed ones, and the image archive
/// holds the image under the name the manifests run, with the controller, the bridge and the
/// CLI (the dashboard's) in it.
#[tokio::test]
async fn release_writes_every_artifact_with_checksums_that_check() -> anyhow::Result<()> {
    let root = sluice_testenv::harness::repo_root();
    let controller = controller_binary().await?;
    let cli = cli_binary().await?;
    let out = std::env::temp_dir().join(format!("sluice-release-{}", std::process::id()));
    let script = root.join("scripts/release.sh");
    let args = [
        script.as_os_str(),
        "--controller".as_ref(),
        controller.as_os_str(),
        "--cli".as_ref(),
        cli.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        // Not the release's own tag: a developer's release image stays as it is.
        "--image-tag".as_ref(),
        "sluice-controller:release-e2e".as_ref(),
    ];
    let status = Command::new("bash")
        .args(args)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()?;
    ensure!(status.success(), "scripts/release.sh failed ({status})");

    let version = env!("CARGO_PKG_VERSION");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let mut written: Vec<String> = std::fs::read_dir(&out)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    written.sort();
    let mut expected = vec![
        format!("sluice-controller-linux-{arch}"),
        format!("sluice-plugin-bridge-linux-{arch}"),
        format!("kubectl-sluice-linux-{arch}"),
        format!("sluice-controller-{version}.tar"),
        format!("sluice-{version}.tgz"),
        "install.yaml".to_string(),
        "namespace-install.yaml".to_string(),
        "SHA256SUMS".to_string(),
    ];
    expected.sort();
    assert_eq!(written, expected);

    let sums = std::fs::read_to_string(out.join("SHA256SUMS"))?;
    assert_eq!(sums.lines().count(), expected.len() - 1, "{sums}");
    run_in(&out, "sha256sum", &["--check", "--strict", "SHA256SUMS"])?;

    for (binary, shows) in [
        (
            format!("sluice-controller-linux-{arch}"),
            "sluice-controller",
        ),
        (format!("kubectl-sluice-linux-{arch}"), "kubectl-sluice"),
    ] {
        let said = run_in(&out, &format!("./{binary}"), &["--version"])?;
        assert_eq!(said.trim(), format!("{shows} {version}"));
    }
    // The bridge is Argo's Go code and has no --version: an executable ELF file, unchanged.
    let bridge = out.join(format!("sluice-plugin-bridge-linux-{arch}"));
    assert!(std::fs::read(&bridge)?.starts_with(b"\x7fELF"));
    assert_eq!(
        std::fs::metadata(&bridge)?.permissions().mode() & 0o755,
        0o755
    );
    for manifest in ["install.yaml", "namespace-install.yaml"] {
        assert!(
            std::fs::read(out.join(manifest))?
                == std::fs::read(root.join("manifests").join(manifest))?,
            "{manifest} differs from manifests/{manifest}"
        );
    }

    let chart = run_in(&out, "tar", &["-tzf", &format!("sluice-{version}.tgz")])?;
    for file in [
        "sluice/Chart.yaml",
        "sluice/values.yaml",
        "sluice/templates/",
    ] {
        assert!(
            chart.lines().any(|l| l.starts_with(file)),
            "{file} not in the chart:\n{chart}"
        );
    }

    let archive = format!("sluice-controller-{version}.tar");
    let manifest = run_in(&out, "tar", &["-xOf", &archive, "manifest.json"])?;
    let manifest: serde_json::Value = serde_json::from_str(&manifest)?;
    assert_eq!(
        manifest[0]["RepoTags"],
        json!([format!("docker.io/library/sluice-controller:{version}")]),
        "the name the manifests' `sluice-controller:{version}` resolves to"
    );
    let mut layers = Vec::new();
    for layer in manifest[0]["Layers"].as_array().into_iter().flatten() {
        let layer = layer.as_str().context("a layer's path")?;
        layers.push(run_in(
            &out,
            "sh",
            &["-c", &format!("tar -xOf {archive} {layer} | tar -t")],
        )?);
    }
    let files = layers.concat();
    for file in [
        "usr/local/bin/sluice-controller",
        "usr/local/bin/sluice-plugin-bridge",
        "usr/local/bin/kubectl-sluice",
    ] {
        assert!(
            files.lines().any(|l| l.trim_start_matches("./") == file),
            "{file} not in the image"
        );
    }
    std::fs::remove_dir_all(&out).ok();
    Ok(())
}
