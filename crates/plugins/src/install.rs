//! Installing a plugin where Argo installs it: `<plugin dir>/<namespace>/<name>`, copied from a
//! `file://` location or downloaded from an `http(s)://` one (its sha256 verified when given),
//! with Argo's error messages. Argo's controller exits on any of these errors; Sluice keeps the
//! message for the objects that use the plugin (docs/plugins.md).

use std::path::{Path, PathBuf};

use ring::digest::{SHA256, digest};

use crate::PluginKind;

/// One plugin of the ConfigMap, as the controller read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    pub kind: PluginKind,
    pub name: String,
    pub location: String,
    pub sha256: String,
    pub args: Vec<String>,
    /// HTTP headers for the download (from the Secrets of `headersFrom`).
    pub headers: Vec<(String, String)>,
    /// Why the plugin cannot be installed before anything is tried (a Secret of
    /// `headersFrom` that cannot be read).
    pub failed: Option<String>,
}

/// Where Argo puts plugin `name` (`<namespace>/<name>`) under `dir`.
pub fn installed_path(dir: &Path, name: &str) -> Result<PathBuf, String> {
    match name.split_once('/') {
        Some((ns, plugin)) if !ns.is_empty() && !plugin.is_empty() && !plugin.contains('/') => {
            Ok(dir.join(ns).join(plugin))
        }
        _ => Err(format!(
            "failed to convert plugin name ({name}) to directory and filename: (plugin repository ({name}) must be in the format of <namespace>/<name>)"
        )),
    }
}

/// Installs `spec` under `dir` (made absolute against the working directory, as Argo does) and
/// returns the executable's path.
pub async fn install(
    spec: &PluginSpec,
    dir: &Path,
    http: &reqwest::Client,
) -> Result<PathBuf, String> {
    if let Some(failed) = &spec.failed {
        return Err(failed.clone());
    }
    let dir = std::path::absolute(dir)
        .map_err(|e| format!("failed to get absolute path of plugin folder: {e}"))?;
    let url = url::Url::parse(&spec.location).map_err(|e| {
        format!(
            "failed to parse plugin location: parse \"{}\": {e}",
            spec.location
        )
    })?;
    let target = installed_path(&dir, &spec.name)?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            format!(
                "failed to create plugin folder for plugin ({}): ({e})",
                spec.name
            )
        })?;
    }
    match url.scheme() {
        "http" | "https" => {
            download(http, spec, &target)
                .await
                .map_err(|e| format!("failed to download plugin from {}: {e}", spec.location))?;
            if !spec.sha256.is_empty() {
                let bytes = std::fs::read(&target).map_err(|e| {
                    format!(
                        "failed to check sha256 of downloaded plugin: failed to read file {}: {e}",
                        target.display()
                    )
                })?;
                if !sha256_matches(&bytes, &spec.sha256) {
                    return Err(format!(
                        "sha256 hash of downloaded plugin ({}) does not match expected hash",
                        spec.location
                    ));
                }
            }
        }
        "file" => {
            // `file://plugin-bin/x` names a path relative to the working directory, as in Go,
            // where the host and the path are joined.
            let source =
                std::path::absolute(format!("{}{}", url.host_str().unwrap_or(""), url.path()))
                    .map_err(|e| format!("failed to get absolute path of plugin: {e}"))?;
            copy(&source, &target).map_err(|e| {
                format!(
                    "failed to copy plugin from {} to {}: {e}",
                    source.display(),
                    target.display()
                )
            })?;
        }
        _ => return Err("plugin location must be of http(s) or file scheme".to_string()),
    }
    set_executable(&target).map_err(|e| {
        format!(
            "failed to set file permissions of plugin ({}): {e}",
            target.display()
        )
    })?;
    Ok(target)
}

/// Argo's check: a 64-character value is the hex SHA-256 of the file; any other value is
/// compared with what Go's `hasher.Sum(fileBytes)` gives (the file's bytes followed by the
/// SHA-256 of nothing, in hex), which no real value matches.
pub fn sha256_matches(bytes: &[u8], expected: &str) -> bool {
    let actual = if expected.len() == 64 {
        hex(digest(&SHA256, bytes).as_ref())
    } else {
        let mut appended = bytes.to_vec();
        appended.extend_from_slice(digest(&SHA256, b"").as_ref());
        hex(&appended)
    };
    actual == expected
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn download(http: &reqwest::Client, spec: &PluginSpec, target: &Path) -> Result<(), String> {
    let mut request = http.get(&spec.location);
    for (k, v) in &spec.headers {
        request = request.header(k, v);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("failed to download file from {}: {e}", spec.location))?;
    let status = response.status();
    if !status.is_success() && !status.is_redirection() && !status.is_informational() {
        return Err(format!(
            "failed to download file from {}: response code {}",
            spec.location,
            status.canonical_reason().unwrap_or("")
        ));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("failed to write to file {}: {e}", target.display()))?;
    write_fresh(target, &body)
        .map_err(|e| format!("failed to create file {}: {e}", target.display()))
}

fn copy(source: &Path, target: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(source)
        .map_err(|e| format!("failed to get file stat of {}: {e}", source.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", source.display()));
    }
    let bytes = std::fs::read(source)
        .map_err(|e| format!("failed to open source file {}: {e}", source.display()))?;
    write_fresh(target, &bytes).map_err(|e| {
        format!(
            "failed to create destination file {}: {e}",
            target.display()
        )
    })
}

/// Writes through a new file moved into place, so that a running plugin's executable is never
/// overwritten in place ("text file busy") and a half-written one is never started.
fn write_fresh(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = target.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, target)
}

fn set_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(location: &str, sha256: &str) -> PluginSpec {
        PluginSpec {
            kind: PluginKind::Step,
            name: "acme/step".into(),
            location: location.into(),
            sha256: sha256.into(),
            args: vec![],
            headers: vec![],
            failed: None,
        }
    }

    #[test]
    fn argos_sha256_rule() {
        let sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
        assert!(sha256_matches(b"hello", sum));
        assert!(!sha256_matches(b"hellO", sum));
        // Not 64 characters: Go's Sum(bytes) appends the empty digest to the bytes.
        let appended = format!(
            "{}{}",
            hex(b"hi"),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(sha256_matches(b"hi", &appended));
        assert!(!sha256_matches(b"hi", "abc"));
    }

    #[test]
    fn names_must_be_namespace_and_name() {
        let dir = Path::new("/p");
        assert_eq!(
            installed_path(dir, "acme/step").unwrap(),
            Path::new("/p/acme/step")
        );
        assert!(
            installed_path(dir, "step")
                .unwrap_err()
                .contains("plugin repository (step) must be in the format of <namespace>/<name>")
        );
    }

    #[tokio::test]
    async fn file_locations_are_copied_and_made_executable() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tmp = std::env::temp_dir().join(format!("sluice-install-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let source = tmp.join("bin");
        std::fs::write(&source, b"#!/bin/sh\n").unwrap();
        let http = reqwest::Client::new();
        let dir = tmp.join("plugin-bin");
        let path = install(
            &spec(&format!("file://{}", source.display()), ""),
            &dir,
            &http,
        )
        .await
        .unwrap();
        assert_eq!(path, dir.join("acme/step"));
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o700
        );

        let missing = tmp.join("missing");
        let err = install(
            &spec(&format!("file://{}", missing.display()), ""),
            &dir,
            &http,
        )
        .await
        .unwrap_err();
        assert!(
            err.starts_with(&format!(
                "failed to copy plugin from {} to {}: failed to get file stat of {}",
                missing.display(),
                dir.join("acme/step").display(),
                missing.display()
            )),
            "{err}"
        );
        let err = install(&spec("ftp://x/y", ""), &dir, &http)
            .await
            .unwrap_err();
        assert_eq!(err, "plugin location must be of http(s) or file scheme");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
