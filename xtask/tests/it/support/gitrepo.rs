//! Temporary git repositories built with git2, without a work tree: files are kept as blob ids,
//! trees are rebuilt only where a file changed, commits get fixed authors and increasing times
//! (so their ids are the same from run to run). Shared by the `adr check` tests and benchmark.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use git2::{Oid, Repository, Signature, Time};

pub struct GitRepo {
    pub dir: tempfile::TempDir,
    pub repo: Repository,
    /// path -> blob id of the branch being built.
    files: BTreeMap<String, Oid>,
    /// Directories whose tree must be rebuilt ("" is the root).
    dirty: BTreeSet<String>,
    trees: HashMap<String, Oid>,
    time: i64,
}

fn parent_dirs(path: &str) -> Vec<String> {
    let mut dirs = vec![String::new()];
    let mut acc = String::new();
    let segs: Vec<&str> = path.split('/').collect();
    for seg in &segs[..segs.len() - 1] {
        if !acc.is_empty() {
            acc.push('/');
        }
        acc.push_str(seg);
        dirs.push(acc.clone());
    }
    dirs
}

impl GitRepo {
    /// An empty repository whose HEAD is the unborn branch `main`.
    pub fn init() -> GitRepo {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = git2::RepositoryInitOptions::new();
        opts.initial_head("main");
        let repo = Repository::init_opts(dir.path(), &opts).unwrap();
        GitRepo {
            dir,
            repo,
            files: BTreeMap::new(),
            dirty: BTreeSet::from([String::new()]),
            trees: HashMap::new(),
            time: 1_700_000_000,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Set (`Some`) or delete (`None`) a file for the next commit.
    pub fn write(&mut self, path: &str, text: Option<&str>) {
        match text {
            Some(t) => {
                let oid = self.repo.blob(t.as_bytes()).unwrap();
                self.files.insert(path.to_string(), oid);
            }
            None => {
                self.files.remove(path);
            }
        }
        self.dirty.extend(parent_dirs(path));
    }

    fn build(&mut self, dir: &str) -> Option<Oid> {
        if !self.dirty.contains(dir)
            && let Some(oid) = self.trees.get(dir)
        {
            return Some(*oid);
        }
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        let mut blobs = Vec::new();
        let mut subdirs = BTreeSet::new();
        for (path, oid) in self.files.range(prefix.clone()..) {
            let Some(rest) = path.strip_prefix(&prefix) else { break };
            match rest.split_once('/') {
                None => blobs.push((rest.to_string(), *oid)),
                Some((sub, _)) => {
                    subdirs.insert(sub.to_string());
                }
            }
        }
        let mut trees = Vec::new();
        for sub in subdirs {
            let full = format!("{prefix}{sub}");
            if let Some(oid) = self.build(&full) {
                trees.push((sub, oid));
            }
        }
        let mut tb = self.repo.treebuilder(None).unwrap();
        for (name, oid) in blobs {
            tb.insert(&name, oid, 0o100644).unwrap();
        }
        for (name, oid) in trees {
            tb.insert(&name, oid, 0o040000).unwrap();
        }
        self.dirty.remove(dir);
        if tb.is_empty() && !dir.is_empty() {
            self.trees.remove(dir);
            return None;
        }
        let oid = tb.write().unwrap();
        self.trees.insert(dir.to_string(), oid);
        Some(oid)
    }

    /// Commit the files on HEAD's branch (or detached HEAD); returns the commit id.
    pub fn commit(&mut self, message: &str) -> Oid {
        let tree_id = self.build("").unwrap();
        let tree = self.repo.find_tree(tree_id).unwrap();
        self.time += 60;
        let sig = Signature::new("Dev", "dev@example.com", &Time::new(self.time, 0)).unwrap();
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        self.repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap()
    }

    /// Write the files and commit them.
    pub fn commit_files(&mut self, message: &str, files: &[(&str, Option<&str>)]) -> Oid {
        for (p, t) in files {
            self.write(p, *t);
        }
        self.commit(message)
    }

    /// Start from the tree of commit `at`.
    fn load(&mut self, at: Oid) {
        let tree = self.repo.find_commit(at).unwrap().tree().unwrap();
        self.files.clear();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                self.files.insert(format!("{dir}{}", entry.name().unwrap()), entry.id());
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        self.trees.clear();
        self.dirty = self.files.keys().flat_map(|p| parent_dirs(p)).collect();
        self.dirty.insert(String::new());
    }

    /// Create branch `name` at `at` and make it HEAD.
    pub fn branch(&mut self, name: &str, at: Oid) {
        {
            let c = self.repo.find_commit(at).unwrap();
            self.repo.branch(name, &c, true).unwrap();
        }
        self.repo.set_head(&format!("refs/heads/{name}")).unwrap();
        self.load(at);
    }

    /// Detach HEAD at `at`.
    pub fn detach(&mut self, at: Oid) {
        self.repo.set_head_detached(at).unwrap();
        self.load(at);
    }

    /// Check the HEAD tree out into the work tree (for `git clone` of the repository).
    pub fn checkout(&self) {
        self.repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force())).unwrap();
    }
}
