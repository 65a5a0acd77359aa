//! The shape of `src/`, as DESIGN.md's map states it: the rooms below the store (every module
//! outside `src/db/`) name nothing of `crate::db`, no import circle spans two folders, and no file
//! outgrows one idea.
//!
//! The import graph is read from the source: each file's `use` trees and the paths it names
//! (`crate::…`, `super::…`, `self::…`, a child module's name), each resolved to the file that
//! defines the module it ends in, following `pub use` re-exports. Comments, strings and
//! `#[cfg(test)]` modules are left out: a unit test may open a whole store. A method called on a
//! type defined elsewhere names nothing, so it is no import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path below the crate root: `["db", "version"]` for `src/db/version/mod.rs`.
type ModPath = Vec<String>;

/// The crate's entry points, which may name any module: the root and the internal features'
/// wrappers over the store.
const ENTRY_POINTS: [&[&str]; 3] = [&[], &["fuzzing"], &["bench_internals"]];

#[test]
fn rooms_below_the_store_name_nothing_of_it() {
    let graph = Graph::read(&src_dir());
    let mut wrong = Vec::new();
    for (from, targets) in &graph.edges {
        if from.first().is_some_and(|m| m == "db") || ENTRY_POINTS.contains(&strs(from).as_slice())
        {
            continue;
        }
        for to in targets
            .iter()
            .filter(|t| t.first().is_some_and(|m| m == "db"))
        {
            wrong.push(format!("{} names {}", graph.file(from), graph.file(to)));
        }
    }
    assert!(
        wrong.is_empty(),
        "lower rooms name crate::db:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_import_circle_spans_two_folders() {
    let graph = Graph::read(&src_dir());
    let mut wrong = Vec::new();
    for circle in graph.circles() {
        let folders: BTreeSet<ModPath> = circle.iter().map(|m| graph.folder(m)).collect();
        if folders.len() > 1 {
            let files: Vec<String> = circle.iter().map(|m| graph.file(m)).collect();
            wrong.push(files.join(" "));
        }
    }
    assert!(
        wrong.is_empty(),
        "import circles across folders:\n{}",
        wrong.join("\n")
    );
}

/// Lines past which a file of `src/` holds more than one idea.
const MAX_FILE_LINES: usize = 1_000;

/// Files that may pass [`MAX_FILE_LINES`] because they are one byte format, written and read in
/// one piece: none today.
const ONE_BYTE_FORMAT: [&str; 0] = [];

#[test]
fn no_file_of_src_passes_a_thousand_lines() {
    let mut stack = vec![src_dir()];
    let mut long = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                let rel = path.strip_prefix(src_dir()).unwrap().to_string_lossy();
                if lines > MAX_FILE_LINES && !ONE_BYTE_FORMAT.contains(&rel.as_ref()) {
                    long.push(format!("src/{rel}: {lines} lines"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "files past {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_reader_sees_through_comments_strings_re_exports_and_inline_modules() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\npub use b::Thing;\n#[cfg(test)]\nmod checks;\n",
    );
    write("checks.rs", "use crate::a::*;\n");
    write(
        "a/mod.rs",
        "// use crate::b::Hidden;\nconst S: &str = \"crate::b::x\";\nmod inner;\n\
         fn f<'a>(c: char) -> bool { c == '\\'' }\nfn g() -> crate::Thing { crate::Thing }\n",
    );
    write(
        "a/inner.rs",
        "mod nested { use super::super::super::Thing; }\n\
         #[cfg(test)]\nmod tests { use crate::b::Other; }\n",
    );
    write("b.rs", "pub struct Thing;\nuse crate::a::*;\n");
    let graph = Graph::read(dir.path());
    let names = |m: &[&str]| -> Vec<String> {
        let m: ModPath = m.iter().map(|s| s.to_string()).collect();
        graph
            .edges
            .get(&m)
            .into_iter()
            .flatten()
            .map(|t| graph.file(t))
            .collect()
    };
    assert_eq!(names(&["a"]), vec!["b.rs"]);
    // The nested module's `super::super::super` is the crate root, whose `Thing` is `b`'s.
    assert_eq!(names(&["a", "inner"]), vec!["b.rs"]);
    assert_eq!(names(&["b"]), vec!["a/mod.rs"]);
    // A file of unit tests is no room.
    assert!(!graph.files.contains_key(&vec!["checks".to_string()]));
    assert_eq!(
        graph.circles(),
        vec![vec![vec!["a".to_string()], vec!["b".to_string()]]]
    );
    assert_eq!(
        graph.folder(&vec!["a".to_string(), "inner".to_string()]),
        ["a"]
    );
    assert_eq!(graph.folder(&vec!["b".to_string()]), Vec::<String>::new());
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn strs(m: &ModPath) -> Vec<&str> {
    m.iter().map(String::as_str).collect()
}

/// Which files of a source tree name which.
struct Graph {
    /// Each module's file, relative to the tree's root.
    files: BTreeMap<ModPath, String>,
    /// The modules each file names (itself left out).
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

/// A name a file re-exports: where it was written and the path it stands for.
type ReExports = BTreeMap<ModPath, BTreeMap<String, (ModPath, Vec<String>)>>;

impl Graph {
    fn read(root: &Path) -> Graph {
        let mut files = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(root).unwrap().with_extension("");
                    let mut m: ModPath = rel
                        .iter()
                        .map(|s| s.to_string_lossy().into_owned())
                        .collect();
                    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                        m.pop();
                    }
                    let shown = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    files.insert(m, shown);
                }
            }
        }
        let mut tokens: BTreeMap<ModPath, Vec<Token>> = files
            .iter()
            .map(|(m, f)| {
                let text = std::fs::read_to_string(root.join(f)).unwrap();
                (m.clone(), tokenize(&blank_comments_and_literals(&text)))
            })
            .collect();
        // Files of unit tests (`#[cfg(test)] mod tests;`) are tests too.
        let test_files: Vec<ModPath> = tokens
            .iter()
            .flat_map(|(m, toks)| {
                test_modules(toks)
                    .into_iter()
                    .map(|(name, _)| [m.as_slice(), &[name]].concat())
            })
            .collect();
        files.retain(|m, _| !test_files.iter().any(|t| m.starts_with(t)));
        tokens.retain(|m, _| files.contains_key(m));
        for toks in tokens.values_mut() {
            *toks = without_test_modules(std::mem::take(toks));
        }
        let mut graph = Graph {
            files,
            edges: BTreeMap::new(),
        };
        let mut re_exports = ReExports::new();
        for (m, toks) in &tokens {
            for (ctx, is_pub, tree) in uses(m, toks) {
                if is_pub {
                    for (path, name) in expand_use(&tree) {
                        if path.last().is_some_and(|l| l != "*") {
                            re_exports
                                .entry(m.clone())
                                .or_default()
                                .insert(name, (ctx.clone(), path));
                        }
                    }
                }
            }
        }
        for (m, toks) in &tokens {
            let mut named = BTreeSet::new();
            for (ctx, _, tree) in uses(m, toks) {
                for (path, _) in expand_use(&tree) {
                    named.extend(graph.resolve(&re_exports, &ctx, &path, 0));
                }
            }
            for (ctx, path) in paths(m, toks) {
                named.extend(graph.resolve(&re_exports, &ctx, &path, 0));
            }
            named.remove(m);
            graph.edges.insert(m.clone(), named);
        }
        graph
    }

    fn file(&self, m: &ModPath) -> String {
        self.files[m].clone()
    }

    /// The folder a module's file sits in, as modules see it: a module with submodules is the
    /// folder of them (`db/mod.rs`, or `foo.rs` beside `foo/`), any other that of its parent.
    fn folder(&self, m: &ModPath) -> ModPath {
        let has_children = self
            .files
            .keys()
            .any(|k| k.len() > m.len() && k.starts_with(m));
        if has_children || m.is_empty() {
            m.clone()
        } else {
            m[..m.len() - 1].to_vec()
        }
    }

    /// The file `path`, written in module `ctx`, names: the longest prefix of it that is a
    /// module with a file, seen through that module's re-exports.
    fn resolve(
        &self,
        re: &ReExports,
        ctx: &ModPath,
        path: &[String],
        depth: usize,
    ) -> Option<ModPath> {
        let full = self.absolute(ctx, path)?;
        let k = (0..=full.len())
            .rev()
            .find(|&k| self.files.contains_key(&full[..k]))?;
        let file = full[..k].to_vec();
        if depth < 8
            && let Some((at, target)) = full.get(k).and_then(|name| re.get(&file)?.get(name))
        {
            let mut next = target.clone();
            next.extend_from_slice(&full[k + 1..]);
            if let Some(t) = self.resolve(re, at, &next, depth + 1) {
                return Some(t);
            }
        }
        Some(file)
    }

    /// `path` from the crate root, if it is a path within the crate.
    fn absolute(&self, ctx: &ModPath, path: &[String]) -> Option<ModPath> {
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let mut base = ctx[..ctx.len().checked_sub(supers)?].to_vec();
                base.extend_from_slice(&path[supers..]);
                Some(base)
            }
            "self" => Some([ctx.as_slice(), &path[1..]].concat()),
            // A child module of the module it is written in (`use tree::Tree` in `db/mod.rs`).
            _ => self
                .files
                .contains_key(&[ctx.as_slice(), &path[..1]].concat())
                .then(|| [ctx.as_slice(), path].concat()),
        }
    }

    /// The import circles: every strongly connected set of more than one file (Tarjan).
    fn circles(&self) -> Vec<Vec<ModPath>> {
        struct Walk<'g> {
            g: &'g Graph,
            index: BTreeMap<&'g ModPath, usize>,
            low: BTreeMap<&'g ModPath, usize>,
            stack: Vec<&'g ModPath>,
            on_stack: BTreeSet<&'g ModPath>,
            found: Vec<Vec<ModPath>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g ModPath) {
                let i = self.index.len();
                self.index.insert(v, i);
                self.low.insert(v, i);
                self.stack.push(v);
                self.on_stack.insert(v);
                let g = self.g;
                for w in g.edges.get(v).into_iter().flatten() {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(lw);
                    } else if self.on_stack.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(iw);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut circle = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        circle.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    if circle.len() > 1 {
                        circle.sort();
                        self.found.push(circle);
                    }
                }
            }
        }
        let mut walk = Walk {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for m in self.files.keys() {
            if !walk.index.contains_key(m) {
                walk.visit(m);
            }
        }
        walk.found
    }
}

/// `text` with comments, string and character literals blanked out (line breaks kept).
fn blank_comments_and_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    while i < c.len() {
        let rest = &c[i..];
        let starts = |p: &str| rest.iter().take(p.len()).copied().eq(p.chars());
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        let end = if starts("//") {
            i + rest.iter().position(|&ch| ch == '\n').unwrap_or(rest.len())
        } else if starts("/*") {
            let (mut j, mut depth) = (i + 2, 1);
            while j < c.len() && depth > 0 {
                if c[j..].starts_with(&['/', '*']) {
                    depth += 1;
                    j += 2;
                } else if c[j..].starts_with(&['*', '/']) {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            j
        } else if !ident_before
            && (starts("r\"") || starts("r#") || starts("br\"") || starts("br#"))
        {
            let from = i + if c[i] == 'b' { 2 } else { 1 };
            let hashes = c[from..].iter().take_while(|&&ch| ch == '#').count();
            if c.get(from + hashes) != Some(&'"') {
                i += 1; // a raw identifier such as `r#type`
                out.push(c[i - 1]);
                continue;
            }
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body = from + hashes + 1;
            let close_at = (body..c.len()).find(|&j| c[j..].starts_with(&close));
            close_at.unwrap_or(c.len()) + close.len()
        } else if c[i] == '"' || (!ident_before && starts("b\"")) {
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // An escaped character: `'\n'`, `'\''`, `'\u{…}'`.
            i + 3
                + c[(i + 3).min(c.len())..]
                    .iter()
                    .position(|&ch| ch == '\'')
                    .unwrap_or(0)
                + 1
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            out.push(c[i]);
            i += 1;
            continue;
        };
        let end = end.min(c.len());
        blank(&mut out, &c[i..end]);
        i = end;
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

fn tokenize(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let j = i + c[i..]
                .iter()
                .take_while(|ch| ch.is_alphanumeric() || **ch == '_')
                .count();
            let word: String = c[i..j].iter().collect();
            // `r#ident` is `ident`.
            if word == "r" && c.get(j) == Some(&'#') {
                i = j + 1;
                continue;
            }
            tokens.push(Token::Ident(word));
            i = j;
        } else if c[i..].starts_with(&[':', ':']) {
            tokens.push(Token::PathSep);
            i += 2;
        } else {
            if !c[i].is_whitespace() {
                tokens.push(Token::Punct(c[i]));
            }
            i += 1;
        }
    }
    tokens
}

fn is_ident(t: Option<&Token>, word: &str) -> bool {
    matches!(t, Some(Token::Ident(w)) if w == word)
}

/// The tokens with every inline `#[cfg(test)]` module (`mod name { … }`) taken out.
fn without_test_modules(tokens: Vec<Token>) -> Vec<Token> {
    let spans: Vec<(usize, usize)> = test_modules(&tokens)
        .into_iter()
        .filter_map(|(_, span)| span)
        .collect();
    tokens
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !spans.iter().any(|(from, to)| (*from..*to).contains(i)))
        .map(|(_, t)| t)
        .collect()
}

/// The modules declared `#[cfg(test)]`: each name, and for an inline one (`mod name { … }`) the
/// span of tokens from its attribute to its closing brace.
fn test_modules(tokens: &[Token]) -> Vec<(String, Option<(usize, usize)>)> {
    let cfg_test: Vec<Token> = tokenize("#[cfg(test)]");
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i..].starts_with(&cfg_test) {
            let mut j = i + cfg_test.len();
            while matches!(tokens.get(j), Some(Token::Punct('#'))) {
                // Further attributes.
                j += 1 + skip_group(&tokens[j + 1..]);
            }
            if is_ident(tokens.get(j), "pub") {
                j += 1;
                if tokens.get(j) == Some(&Token::Punct('(')) {
                    j += skip_group(&tokens[j..]);
                }
            }
            if let (true, Some(Token::Ident(name))) =
                (is_ident(tokens.get(j), "mod"), tokens.get(j + 1))
            {
                if tokens.get(j + 2) == Some(&Token::Punct('{')) {
                    let end = j + 2 + skip_group(&tokens[j + 2..]);
                    found.push((name.clone(), Some((i, end))));
                    i = end;
                    continue;
                }
                found.push((name.clone(), None));
            }
        }
        i += 1;
    }
    found
}

/// How many tokens the bracketed group `tokens` starts with spans.
fn skip_group(tokens: &[Token]) -> usize {
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The module each token is written in: the file's, then the inline `mod name { … }` around it.
fn contexts(file: &ModPath, tokens: &[Token]) -> Vec<ModPath> {
    let mut ctx = Vec::with_capacity(tokens.len());
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut pending: Option<String> = None;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Punct('{') => {
                depth += 1;
                if let Some(name) = pending.take() {
                    open.push((name, depth));
                }
            }
            Token::Punct('}') => {
                if open.last().is_some_and(|(_, d)| *d == depth) {
                    open.pop();
                }
                depth -= 1;
            }
            Token::Ident(w) if w == "mod" => {
                if let (Some(Token::Ident(name)), Some(Token::Punct('{'))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    pending = Some(name.clone());
                }
            }
            _ => {}
        }
        let mut m = file.clone();
        m.extend(open.iter().map(|(n, _)| n.clone()));
        ctx.push(m);
    }
    ctx
}

/// Each `use` declaration: the module it is written in, whether it re-exports (`pub …`), and its
/// tree's tokens.
fn uses(file: &ModPath, tokens: &[Token]) -> Vec<(ModPath, bool, Vec<Token>)> {
    let ctx = contexts(file, tokens);
    let mut found = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if is_ident(Some(t), "use")
            && !matches!(tokens.get(i.wrapping_sub(1)), Some(Token::PathSep))
        {
            let end = tokens[i..]
                .iter()
                .position(|t| *t == Token::Punct(';'))
                .map_or(tokens.len(), |p| i + p);
            // `pub use`, or `pub(crate) use` and the like.
            let is_pub = match tokens.get(i.wrapping_sub(1)) {
                Some(Token::Punct(')')) => {
                    let open = tokens[..i].iter().rposition(|t| *t == Token::Punct('('));
                    open.is_some_and(|o| is_ident(tokens.get(o.wrapping_sub(1)), "pub"))
                }
                t => is_ident(t, "pub"),
            };
            found.push((ctx[i].clone(), is_pub, tokens[i + 1..end].to_vec()));
        }
    }
    found
}

/// Every path (`a::b::c`) outside `use` declarations, with the module it is written in.
fn paths(file: &ModPath, tokens: &[Token]) -> Vec<(ModPath, Vec<String>)> {
    let ctx = contexts(file, tokens);
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_ident(tokens.get(i), "use") {
            i += tokens[i..]
                .iter()
                .position(|t| *t == Token::Punct(';'))
                .unwrap_or(tokens.len());
            continue;
        }
        let starts = matches!(tokens.get(i), Some(Token::Ident(_)))
            && tokens.get(i + 1) == Some(&Token::PathSep)
            && !matches!(tokens.get(i.wrapping_sub(1)), Some(Token::PathSep));
        if starts {
            let mut path = Vec::new();
            let mut j = i;
            while let Some(Token::Ident(w)) = tokens.get(j) {
                path.push(w.clone());
                if tokens.get(j + 1) != Some(&Token::PathSep) {
                    break;
                }
                j += 2;
            }
            found.push((ctx[i].clone(), path));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// The paths a `use` tree stands for, each with the name it binds.
fn expand_use(tree: &[Token]) -> Vec<(Vec<String>, String)> {
    fn walk(
        t: &[Token],
        mut i: usize,
        prefix: Vec<String>,
        out: &mut Vec<(Vec<String>, String)>,
    ) -> usize {
        let mut path = prefix;
        while i < t.len() {
            match &t[i] {
                Token::Punct('{') => {
                    i += 1;
                    while i < t.len() && t[i] != Token::Punct('}') {
                        i = walk(t, i, path.clone(), out);
                        if t.get(i) == Some(&Token::Punct(',')) {
                            i += 1;
                        }
                    }
                    return i + 1;
                }
                Token::PathSep => i += 1,
                Token::Punct(',' | '}') => break,
                Token::Punct('*') => {
                    path.push("*".into());
                    i += 1;
                }
                Token::Ident(w) if w == "as" => {
                    if let Some(Token::Ident(alias)) = t.get(i + 1) {
                        out.push((path.clone(), alias.clone()));
                    }
                    return i + 2;
                }
                Token::Ident(w) => {
                    path.push(w.clone());
                    i += 1;
                }
                Token::Punct(_) => i += 1,
            }
        }
        let name = path.last().cloned().unwrap_or_default();
        out.push((path, name));
        i
    }
    let mut out = Vec::new();
    walk(tree, 0, Vec::new(), &mut out);
    out.retain(|(p, _)| !p.is_empty());
    out
}
