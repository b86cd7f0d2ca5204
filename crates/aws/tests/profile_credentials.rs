//! A named profile's credentials are that profile's, even when the environment has keys (the
//! Go SDK Argo uses gives a named profile the first word too). The shared files are found
//! through environment variables, so the check runs in a child process of this test binary
//! with an environment of its own.

use std::process::Command;

use sluice_aws::aws_credential_types::provider::ProvideCredentials as _;

/// Set in the child's environment: the child checks, the parent sets up and asks.
const CHILD: &str = "SLUICE_PROFILE_TEST_CHILD";
const TEST: &str = "a_named_profile_wins_over_the_environment";

#[tokio::test]
async fn a_named_profile_wins_over_the_environment() {
    if std::env::var_os(CHILD).is_some() {
        return check().await;
    }
    let dir = std::env::temp_dir().join(format!("sluice-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = dir.join("credentials");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = default-secret\n\n\
         [team]\naws_access_key_id = AKIATEAM\naws_secret_access_key = team-secret\n",
    )
    .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture"])
        .env(CHILD, "1")
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT")
        .env("AWS_SECRET_ACCESS_KEY", "environment-secret")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// In the child: the chain takes the environment's keys, a named profile its own.
async fn check() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let base = sluice_aws::loader().load().await;
    let chain = base.credentials_provider().unwrap();
    let chain = chain.provide_credentials().await.unwrap();
    assert_eq!(chain.access_key_id(), "AKIAENVIRONMENT");
    let team = sluice_aws::profile_credentials(&base, "team")
        .provide_credentials()
        .await
        .unwrap();
    assert_eq!(team.access_key_id(), "AKIATEAM");
    assert_eq!(team.secret_access_key(), "team-secret");
    let missing = sluice_aws::profile_credentials(&base, "nobody")
        .provide_credentials()
        .await;
    assert!(missing.is_err(), "{missing:?}");
}
