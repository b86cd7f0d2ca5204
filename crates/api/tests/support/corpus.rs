//! Argo's v1.9.1 manifests (examples and e2e fixtures) as test data.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One object of one of our kinds found in the corpus.
pub struct CorpusObject {
    /// Path relative to the corpus root.
    pub file: PathBuf,
    /// Position among the file's documents.
    pub index: usize,
    pub kind: String,
    pub value: Value,
}

impl CorpusObject {
    /// Objects Argo keeps as deliberately malformed input.
    pub fn expected_failure(&self) -> bool {
        self.file
            .components()
            .any(|c| c.as_os_str() == "expectedfailures")
    }

    pub fn label(&self) -> String {
        format!("{}#{} ({})", self.file.display(), self.index, self.kind)
    }
}

/// The corpus objects plus the files that were left out.
pub struct Corpus {
    pub objects: Vec<CorpusObject>,
    /// Files inside a Helm chart (not YAML until rendered).
    pub helm_files: Vec<PathBuf>,
    /// Files that are templates with unquoted `{{…}}` placeholders and so not valid YAML.
    pub templated_files: Vec<PathBuf>,
    /// Documents of other kinds that the YAML parser rejects (e.g. continuation lines indented
    /// less than the YAML spec requires), as `file#index`.
    pub unparsed_foreign: Vec<String>,
}

/// The corpus root: `$SLUICE_ARGO_CORPUS`, else `shared/argo-corpus/v1.9.1` next to the repository.
/// Panics when it is missing, so that the corpus tests fail rather than pass vacuously.
pub fn corpus_dir() -> PathBuf {
    let dir = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        dir.join("manifests/crds/rollout-crd.yaml").is_file(),
        "Argo corpus not found at {} (set SLUICE_ARGO_CORPUS to the v1.9.1 corpus)",
        dir.display()
    );
    dir
}

const KINDS: [&str; 5] = crate::support::KINDS;

/// Loads every object of our five kinds from `examples/` and `test/e2e/`.
pub fn load() -> Corpus {
    let root = corpus_dir();
    let mut files = Vec::new();
    for sub in ["examples", "test/e2e"] {
        collect_yaml(&root.join(sub), &mut files);
    }
    files.sort();
    assert!(!files.is_empty(), "no YAML files under {}", root.display());

    let mut corpus = Corpus {
        objects: Vec::new(),
        helm_files: Vec::new(),
        templated_files: Vec::new(),
        unparsed_foreign: Vec::new(),
    };
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().to_path_buf();
        if in_helm_chart(&root, &path) {
            corpus.helm_files.push(rel);
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = match sluice_api::yaml::from_multi_doc_str(&text) {
            Ok(docs) => docs,
            Err(_) if text.contains("{{") => {
                corpus.templated_files.push(rel);
                continue;
            }
            Err(_) => parse_documents_one_by_one(&rel, &text, &mut corpus.unparsed_foreign),
        };
        for (index, value) in docs.into_iter().enumerate() {
            let kind = value["kind"].as_str().unwrap_or_default().to_owned();
            let ours = value["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("argoproj.io/"))
                && KINDS.contains(&kind.as_str());
            if ours {
                corpus.objects.push(CorpusObject {
                    file: rel.clone(),
                    index,
                    kind,
                    value,
                });
            }
        }
    }
    corpus
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn in_helm_chart(root: &Path, file: &Path) -> bool {
    file.ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(root) && *dir != root)
        .any(|dir| dir.join("Chart.yaml").is_file())
}

/// Parses a stream document by document, so that one malformed foreign document (not one of
/// ours) does not hide the rest. A malformed document of ours fails the test.
fn parse_documents_one_by_one(rel: &Path, text: &str, unparsed: &mut Vec<String>) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut chunks = Vec::new();
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            chunks.push(std::mem::take(&mut current));
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    chunks.push(current);
    for (index, chunk) in chunks.iter().enumerate() {
        match sluice_api::yaml::from_multi_doc_str(chunk) {
            Ok(parsed) => docs.extend(parsed),
            Err(err) => {
                assert!(
                    !chunk.contains("argoproj.io/"),
                    "{}: Argo document {index} does not parse: {err}",
                    rel.display()
                );
                unparsed.push(format!("{}#{index}", rel.display()));
            }
        }
    }
    docs
}
