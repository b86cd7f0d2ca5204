//! Writes `manifests/install.yaml`, `namespace-install.yaml` and `dashboard-install.yaml` from their
//! kustomizations (`make manifests`). With `--check`, only says whether they are in sync.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let manifests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../manifests");
    let check = std::env::args().any(|a| a == "--check");
    for (file, dir) in sluice_testenv::manifests::RENDERED {
        let want = sluice_testenv::manifests::render(&manifests.join(dir), dir)?;
        let path = manifests.join(file);
        if check {
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            anyhow::ensure!(
                have == want,
                "manifests/{file} is out of date: run `make manifests`"
            );
        } else {
            std::fs::write(&path, want)?;
            println!("wrote manifests/{file}");
        }
    }
    Ok(())
}
