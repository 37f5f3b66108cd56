//! The architecture's dependency rules, read from cargo's own resolution of the workspace
//! (`cargo metadata`, `cargo tree`), for every crate: which energon crates each may use, which
//! may link SQLite or Python, and what a crate must never pull in without a feature.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use serde_json::Value;

/// The layers, each allowed to depend on the ones before it (ARCHITECTURE.md, Code Map).
const LAYERS: [&str; 7] = [
    "energon-dist",
    "energon-index",
    "energon-reader",
    "energon-mix",
    "energon-cook",
    "energon-cli",
    "energon-py",
];

/// Crates of tests, fixtures, examples and benchmarks: no layer may depend on them.
const TEST_CRATES: [&str; 4] =
    ["energon-tests", "energon-fixtures", "energon-examples", "energon-bench"];

/// Third-party crates only one layer may depend on directly.
const OWNED: [(&str, &str); 3] =
    [("rusqlite", "energon-index"), ("pyo3", "energon-py"), ("numpy", "energon-py")];

/// The packages Python comes with: no layer but energon-py may reach them, however indirectly.
const PYTHON: [&str; 2] = ["pyo3", "numpy"];

/// Runs cargo with `args` in the workspace, with its lock file.
fn cargo(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out =
        Command::new(env!("CARGO")).args(args).arg("--locked").current_dir(root).output().unwrap();
    assert!(out.status.success(), "cargo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Every package's dependencies by name in `metadata` (the output of `cargo metadata`): those of
/// normal and build kind (what the package links), and the workspace members.
struct Graph {
    members: BTreeSet<String>,
    links: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn of(metadata: &Value) -> Graph {
        let names: BTreeMap<&str, &str> = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
            .collect();
        let members = metadata["workspace_members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| names[id.as_str().unwrap()].to_owned())
            .collect();
        let mut links = BTreeMap::new();
        for node in metadata["resolve"]["nodes"].as_array().unwrap() {
            let deps = node["deps"].as_array().unwrap().iter().filter(|dep| {
                dep["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].as_str() != Some("dev"))
            });
            let deps = deps.map(|dep| names[dep["pkg"].as_str().unwrap()].to_owned()).collect();
            links.insert(names[node["id"].as_str().unwrap()].to_owned(), deps);
        }
        Graph { members, links }
    }

    /// Every package `name` links, however indirectly.
    fn reach(&self, name: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name];
        while let Some(next) = todo.pop() {
            for dep in self.links.get(next).into_iter().flatten() {
                if seen.insert(dep.as_str()) {
                    todo.push(dep);
                }
            }
        }
        seen
    }

    /// What breaks the rules, one line each.
    fn violations(&self) -> Vec<String> {
        let mut res = Vec::new();
        for (layer, name) in LAYERS.iter().enumerate() {
            if !self.members.contains(*name) {
                res.push(format!("{name} is not a workspace member"));
                continue;
            }
            for dep in &self.links[*name] {
                if dep.starts_with("energon-") && !LAYERS[..layer].contains(&dep.as_str()) {
                    res.push(format!("{name} depends on {dep}, which is not a layer before it"));
                }
            }
            for (package, owner) in OWNED {
                if name != &owner && self.links[*name].contains(package) {
                    res.push(format!("{name} depends on {package}, which only {owner} may"));
                }
            }
            if *name != "energon-py" {
                let reach = self.reach(name);
                for package in PYTHON.iter().filter(|p| reach.contains(**p)) {
                    res.push(format!("{name} links {package} (Python) through its dependencies"));
                }
            }
        }
        for member in &self.members {
            if !LAYERS.contains(&member.as_str()) && !TEST_CRATES.contains(&member.as_str()) {
                res.push(format!("{member} is neither a layer nor a test crate: add it to a list"));
            }
        }
        res
    }
}

#[test]
fn every_crate_depends_only_on_the_layers_before_it() {
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1"])).unwrap();
    let violations = Graph::of(&metadata).violations();
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn the_object_store_runtime_comes_only_with_the_remote_feature() {
    // tokio and the object-store clients are energon-index's `remote` feature, which the layers
    // below the command line leave off by default.
    for krate in ["energon-index", "energon-reader", "energon-mix", "energon-cook"] {
        let tree = cargo(&["tree", "-p", krate, "-e", "normal", "--prefix", "none"]);
        let pulled: Vec<&str> = tree
            .lines()
            .filter(|l| l.starts_with("tokio ") || l.starts_with("object_store "))
            .collect();
        assert!(pulled.is_empty(), "{krate} pulls in {pulled:?} without `remote`");
    }
    let tree = cargo(&["tree", "-p", "energon-index", "--features", "remote", "-e", "normal"]);
    assert!(tree.contains("tokio v"), "the check would not see tokio: {tree}");
}

#[test]
fn a_broken_edge_is_reported() {
    // The workspace as it is, with an edge each rule forbids added: the checks must see them.
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1"])).unwrap();
    let mut graph = Graph::of(&metadata);
    assert!(graph.violations().is_empty());
    let add = |graph: &mut Graph, from: &str, to: &str| {
        graph.links.get_mut(from).unwrap().insert(to.to_owned());
    };
    add(&mut graph, "energon-reader", "energon-cook");
    add(&mut graph, "energon-mix", "rusqlite");
    add(&mut graph, "energon-dist", "energon-tests");
    graph.links.insert("energon-tests".to_owned(), BTreeSet::from(["pyo3".to_owned()]));
    let violations = graph.violations();
    let expect = [
        "energon-reader depends on energon-cook",
        "energon-mix depends on rusqlite",
        "energon-dist links pyo3",
    ];
    for line in expect {
        assert!(violations.iter().any(|v| v.starts_with(line)), "{line}: {violations:#?}");
    }
}
