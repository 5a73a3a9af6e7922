//! The workspace's shape, checked: no module of any crate imports, directly or through others,
//! a module that imports it back, no source file grows past the size a reader can hold, and the
//! CLI and the plugin build the crates they share with the same features.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use stemflow_host_tests::{run_ok, workspace_root};

/// Lines a source file of any crate may have before its unit tests.
const MAX_FILE_LINES: usize = 700;

/// The crates whose module graphs are checked, by source folder.
const CRATE_SOURCES: [&str; 14] = [
    "engine/src",
    "onnx/src",
    "yaml/src",
    "convert/src",
    "fetch/src",
    "paths/src",
    "kit/src",
    "audio/src",
    "manifest/src",
    "plugin-state/src",
    "plugin/src",
    "cli/src",
    "tests/src",
    "xtask/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file relative to its crate's `src`: `a/b.rs` and `a/b/mod.rs`
/// are `a::b`; `lib.rs` and `main.rs` are the root (empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "mod.rs" | "lib.rs" | "main.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_owned()),
    }
    parts
}

/// Source text without comments and string/char literals, so paths in docs and messages do
/// not count.
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'r' if bytes.get(i + 1) == Some(&b'#')
                || (bytes.get(i + 1) == Some(&b'"')
                    && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric())) =>
            {
                // Raw string: r"…", r#"…"#.
                let mut j = i + 1;
                let mut hashes = 0;
                while bytes.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if bytes.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                let closing: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                while j < bytes.len() && !bytes[j..].starts_with(&closing) {
                    j += 1;
                }
                i = j + closing.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') || (bytes.get(i + 1) == Some(&b'\\')) => {
                // A char literal ('x', '\n', '\''); lifetimes ('a) have no closing quote.
                let mut j = i + 1;
                if bytes[j] == b'\\' {
                    j += 1;
                }
                j += 1;
                while j < bytes.len() && bytes[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            }
            _ => {
                let c = text[i..].chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Code without inline `mod name { … }` blocks (test modules): their `super` is the file's own
/// module, and tests are not part of the crate's structure.
fn without_inline_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_keyword(rest, "mod") {
        let after = &rest[at + 3..];
        let name_len = after
            .trim_start()
            .find(|c: char| !is_ident_char(c))
            .unwrap_or(0);
        let skipped = after.len() - after.trim_start().len();
        let tail = after[skipped + name_len..].trim_start();
        if name_len > 0 && tail.starts_with('{') {
            out.push_str(&rest[..at]);
            let body_start = rest.len() - tail.len();
            let mut depth = 0usize;
            let mut end = rest.len();
            for (i, c) in rest[body_start..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = body_start + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &rest[end..];
        } else {
            out.push_str(&rest[..at + 3]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Every path the code names, with `use` groups expanded: `use a::{b, c::d}` gives `a::b` and
/// `a::c::d`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    // `use` statements, braces expanded.
    let mut rest = code;
    while let Some(at) = find_keyword(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        expand_use(&after[..end], &mut Vec::new(), &mut paths);
        rest = &after[end..];
    }
    // Inline paths: identifiers joined by `::`.
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if is_ident_start(chars[i])
            && (i == 0 || !is_ident_char(chars[i - 1]) && chars[i - 1] != ':')
        {
            let mut segments = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < chars.len() && is_ident_char(chars[j]) {
                    j += 1;
                }
                segments.push(chars[start..j].iter().collect::<String>());
                if j + 2 < chars.len()
                    && chars[j] == ':'
                    && chars[j + 1] == ':'
                    && is_ident_start(chars[j + 2])
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segments.len() > 1 {
                paths.push(segments);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    paths
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn find_keyword(text: &str, keyword: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(keyword) {
        let at = from + at;
        let before_ok = at == 0 || !is_ident_char(bytes[at - 1] as char);
        let after_ok = bytes
            .get(at + keyword.len())
            .is_some_and(|&b| (b as char).is_whitespace());
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + keyword.len();
    }
    None
}

/// The parts of a `use` group's inside (`a, b::{c, d}`), split at its top-level commas.
fn top_level_parts(inner: &str) -> impl Iterator<Item = &str> {
    let mut level = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in inner.char_indices() {
        match c {
            '{' => level += 1,
            '}' => level -= 1,
            ',' if level == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter()
}

fn expand_use(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let depth = prefix.len();
        prefix.extend(head);
        for part in top_level_parts(inner) {
            expand_use(part, prefix, out);
        }
        prefix.truncate(depth);
    } else {
        let path: Vec<String> = tree
            .split(" as ")
            .next()
            .unwrap_or("")
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if !path.is_empty() {
            out.push(prefix.iter().cloned().chain(path).collect());
        }
    }
}

/// The module a path points into (the longest prefix that is a module), from the module
/// `current`; `None` for paths outside the crate, which include paths through a name a module
/// imports from another crate (`use stemflow_audio::decode;` makes `crate::decode::X` point
/// outside).
fn resolve(
    path: &[String],
    current: &[String],
    modules: &BTreeSet<Vec<String>>,
    imported: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            base = Vec::new();
            rest = &path[1..];
        }
        "self" => {
            base = current.to_vec();
            rest = &path[1..];
        }
        "super" => {
            base = current.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        first => {
            // A child module of the current one, named directly.
            let mut child = current.to_vec();
            child.push(first.to_owned());
            if !modules.contains(&child) {
                return None;
            }
            base = current.to_vec();
        }
    }
    for segment in rest {
        let mut next = base.clone();
        next.push(segment.clone());
        if modules.contains(&next) {
            base = next;
        } else if imported.contains(&next) {
            return None;
        } else {
            break;
        }
    }
    Some(base)
}

/// The names `code`, the module `current`, imports from other crates, each as the path it has
/// in this crate: `use stemflow_audio::{decode, encode as writers};` in the root gives `decode`
/// and `writers`; `pub use stemflow_manifest as manifest;` in `separate` gives
/// `separate::manifest`.
fn imported_from_other_crates(
    code: &str,
    current: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Vec<Vec<String>> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = find_keyword(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        let tree = after[..end].trim();
        rest = &after[end..];
        let first = tree.split("::").next().unwrap_or("").trim();
        let mut child = current.to_vec();
        child.push(first.to_owned());
        if matches!(first, "crate" | "self" | "super" | "std" | "core" | "alloc")
            || first.is_empty()
            || modules.contains(&child)
        {
            continue;
        }
        for leaf in use_leaves(tree) {
            let mut name = current.to_vec();
            name.push(leaf);
            names.push(name);
        }
    }
    names
}

/// The names a `use` tree brings into scope: the last segment of each leaf, or its `as` name.
fn use_leaves(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        top_level_parts(inner).flat_map(use_leaves).collect()
    } else {
        let name = match tree.split_once(" as ") {
            Some((_, alias)) => alias.trim(),
            None => tree.rsplit("::").next().unwrap_or("").trim(),
        };
        if name.is_empty() || name == "*" || name == "self" || name == "_" {
            Vec::new()
        } else {
            vec![name.to_owned()]
        }
    }
}

/// Strongly connected components of more than one module.
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    let nodes: Vec<&Vec<String>> = edges.keys().collect();
    let reach = |from: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for node in &nodes {
        if done.contains(*node) {
            continue;
        }
        let component: Vec<Vec<String>> = nodes
            .iter()
            .filter(|other| {
                *other != node
                    && reachable[*node].contains(**other)
                    && reachable[**other].contains(*node)
            })
            .map(|n| (*n).clone())
            .chain(std::iter::once((*node).clone()))
            .collect();
        for member in &component {
            done.insert(member.clone());
        }
        if component.len() > 1 {
            found.push(component);
        }
    }
    found
}

fn module_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let codes: Vec<(Vec<String>, String)> = files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            (
                module_of(src, file),
                without_inline_modules(&code_only(&text)),
            )
        })
        .collect();
    let imported: BTreeSet<Vec<String>> = codes
        .iter()
        .flat_map(|(module, code)| imported_from_other_crates(code, module, &modules))
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &codes {
        // A file's own `mod x;` declarations are not imports.
        let targets = edges.entry(module.clone()).or_default();
        for path in named_paths(code) {
            if let Some(target) = resolve(&path, module, &modules, &imported) {
                if target != *module {
                    targets.insert(target);
                }
            }
        }
    }
    edges
}

#[test]
fn no_crate_has_an_import_cycle() {
    let root = workspace_root();
    let mut report = Vec::new();
    let name = |m: &Vec<String>| {
        if m.is_empty() {
            "(crate root)".to_owned()
        } else {
            m.join("::")
        }
    };
    for crate_src in CRATE_SOURCES {
        let src = root.join(crate_src);
        let graph = module_graph(&src);
        for component in cycles(&graph) {
            let names: Vec<String> = component.iter().map(name).collect();
            report.push(format!("{crate_src}: {}", names.join(" ⇄ ")));
            // The edges inside the cycle, so the message says what to move.
            for module in &component {
                let inside: Vec<String> = graph[module]
                    .iter()
                    .filter(|t| component.contains(t))
                    .map(name)
                    .collect();
                report.push(format!("    {} → {}", name(module), inside.join(", ")));
            }
        }
    }
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn a_name_imported_from_another_crate_is_not_this_crates_module() {
    // `use stemflow_audio::{decode, …}` in the root and `pub use stemflow_manifest as manifest;`
    // in `separate`: paths through them leave the crate, so they draw no edge to the root or
    // to `separate` (which would close a cycle with every module naming them).
    let modules: BTreeSet<Vec<String>> = [
        vec![],
        vec!["separate".to_owned()],
        vec!["separate".to_owned(), "args".to_owned()],
    ]
    .into();
    let root = code_only("use stemflow_audio::{decode, disk_space as disk};\nuse std::fs;");
    let separate = code_only("pub use stemflow_manifest as manifest;\nuse args::Thing;");
    let mut imported: BTreeSet<Vec<String>> = imported_from_other_crates(&root, &[], &modules)
        .into_iter()
        .collect();
    let separate_module = vec!["separate".to_owned()];
    imported.extend(imported_from_other_crates(
        &separate,
        &separate_module,
        &modules,
    ));
    assert_eq!(
        imported,
        [
            vec!["decode".to_owned()],
            vec!["disk".to_owned()],
            vec!["separate".to_owned(), "manifest".to_owned()],
        ]
        .into()
    );
    let args = vec!["separate".to_owned(), "args".to_owned()];
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        resolve(
            &path("crate::decode::AudioDecoder"),
            &args,
            &modules,
            &imported
        ),
        None
    );
    assert_eq!(
        resolve(&path("super::manifest::Shard"), &args, &modules, &imported),
        None
    );
    // A name of the crate's own still resolves to its module.
    assert_eq!(
        resolve(&path("crate::separate::run"), &args, &modules, &imported),
        Some(separate_module)
    );
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    // The checker itself: two modules that import each other form one component.
    let modules: BTreeSet<Vec<String>> =
        [vec![], vec!["a".to_owned()], vec!["b".to_owned()]].into();
    let from_a = named_paths(&code_only(
        "use crate::b::Thing; // crate::c::Nope\nfn f() { let s = \"crate::a\"; }",
    ));
    let from_b = named_paths(&without_inline_modules(&code_only(
        "use super::{a::{self, Other}, x};\n#[cfg(test)]\nmod tests { use super::super::b::Y; }",
    )));
    let mut edges = BTreeMap::new();
    for (module, paths) in [("a", from_a), ("b", from_b)] {
        let module = vec![module.to_owned()];
        let targets: BTreeSet<Vec<String>> = paths
            .iter()
            .filter_map(|p| resolve(p, &module, &modules, &BTreeSet::new()))
            .filter(|t| *t != module)
            .collect();
        edges.insert(module, targets);
    }
    assert_eq!(edges[&vec!["a".to_owned()]], [vec!["b".to_owned()]].into());
    assert!(edges[&vec!["b".to_owned()]].contains(&vec!["a".to_owned()]));
    assert_eq!(cycles(&edges).len(), 1);
}

/// The crates' source folders: every `*/src` of the workspace but the host-test crate's
/// (`tests/`: all of it is tests), vendor/ and build outputs.
fn all_source_folders() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !matches!(name, "vendor" | "target" | "runtime" | "tests") && !name.starts_with('.')
        })
        .map(|path| path.join("src"))
        .filter(|src| src.is_dir())
        .collect();
    folders.sort();
    folders
}

/// The lines of a source file a reader must hold: those before its unit tests (the first
/// `#[cfg(test)]` at the start of a line). A file of tests (`tests.rs`, `tests/…` below its
/// crate's `src`; `file` is the path from there) has none.
fn lines_before_tests(file: &Path, text: &str) -> usize {
    let is_test_file = file.file_name().is_some_and(|n| n == "tests.rs")
        || file.components().any(|c| c.as_os_str() == "tests");
    if is_test_file {
        return 0;
    }
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
}

#[test]
fn no_source_file_is_too_long_to_read() {
    let folders = all_source_folders();
    for expected in [
        "engine/src",
        "cli/src",
        "plugin/src",
        "convert/src",
        "fetch/src",
    ] {
        assert!(
            folders.contains(&workspace_root().join(expected)),
            "{expected} not among the source folders {folders:?}"
        );
    }
    let mut too_long = Vec::new();
    for folder in &folders {
        let mut files = Vec::new();
        rust_files(folder, &mut files);
        for file in files {
            let from_src = file.strip_prefix(folder).unwrap();
            let lines = lines_before_tests(from_src, &std::fs::read_to_string(&file).unwrap());
            if lines > MAX_FILE_LINES {
                too_long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        too_long.is_empty(),
        "source files over {MAX_FILE_LINES} lines before their tests: {}",
        too_long.join(", ")
    );
}

#[test]
fn a_file_is_measured_up_to_its_unit_tests() {
    let text = "fn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n}\n";
    assert_eq!(lines_before_tests(Path::new("a.rs"), text), 2);
    assert_eq!(lines_before_tests(Path::new("a.rs"), "fn a() {}\n"), 1);
    assert_eq!(lines_before_tests(Path::new("stream/tests.rs"), text), 0);
    assert_eq!(lines_before_tests(Path::new("stream/tests/a.rs"), text), 0);
}

/// Whether a line of code reads or writes protobuf fields outside the ONNX layer: the wire
/// reader, or a `put_*` call given a bare field number instead of a `field::` name.
fn spells_onnx_by_hand(line: &str) -> bool {
    if line.contains("Fields::new(") || line.contains("read_varint(") {
        return true;
    }
    // The wire encoders that take a field number (`stemflow_onnx::wire`).
    let call = ["put_bytes(", "put_int64(", "put_float(", "put_key("]
        .iter()
        .find_map(|name| line.find(name).map(|at| &line[at..]));
    let Some(call) = call else {
        return false;
    };
    let Some(args) = call.find('(').map(|open| &call[open + 1..]) else {
        return false;
    };
    // The field number is the second argument: `put_bytes(out, 7, …)`.
    args.split(',')
        .nth(1)
        .is_some_and(|field| field.trim().parse::<u32>().is_ok())
}

#[test]
fn onnx_is_read_and_written_only_through_the_onnx_crate() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    for crate_src in CRATE_SOURCES.iter().filter(|src| **src != "onnx/src") {
        let mut files = Vec::new();
        rust_files(&root.join(crate_src), &mut files);
        for file in files {
            let code = code_only(&std::fs::read_to_string(&file).unwrap());
            for (number, line) in code.lines().enumerate() {
                if spells_onnx_by_hand(line) {
                    offenders.push(format!(
                        "{}:{}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "protobuf read or written outside stemflow-onnx (use its views, encoders and field names):\n{}",
        offenders.join("\n")
    );
    assert!(spells_onnx_by_hand("put_bytes(&mut out, 7, &graph);"));
    assert!(spells_onnx_by_hand("for f in Fields::new(body) {"));
    assert!(!spells_onnx_by_hand(
        "put_bytes(&mut out, graph::NODE, &node);"
    ));
    assert!(!spells_onnx_by_hand("output_gain(1, 2)"));
    assert!(
        !spells_onnx_by_hand("put_u16(&mut bytes, 8, 12);"),
        "a zip header field is not protobuf"
    );
    assert!(spells_onnx_by_hand("wire::put_int64(&mut a, 20, 4);"));
}

/// Every crate `package`'s normal and build dependencies reach, with the features enabled on
/// it: `cargo tree`'s view of one `cargo build -p package`.
fn resolved_features(package: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = run_ok(
        &format!("cargo tree -p {package}"),
        std::process::Command::new(cargo)
            .current_dir(workspace_root())
            .args(["tree", "--locked", "-q", "-p", package])
            .args(["-e", "normal,build,features", "--prefix", "none"])
            .args(["-f", "{p}|{f}"]),
    );
    let mut crates: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        crates.entry(package.to_owned()).or_default().extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned),
        );
    }
    crates
}

#[test]
fn the_cli_and_the_plugin_build_what_they_share_with_one_feature_set() {
    let cli = resolved_features("stemflow-cli");
    let plugin = resolved_features("stemflow");
    let shared: Vec<&String> = cli.keys().filter(|c| plugin.contains_key(*c)).collect();
    assert!(shared.len() > 50, "cargo tree found too little: {shared:?}");
    let differ: Vec<String> = shared
        .into_iter()
        .filter(|c| cli[*c] != plugin[*c])
        .map(|c| {
            format!(
                "{c}: the CLI alone enables {:?}, the plugin alone {:?}",
                cli[c].difference(&plugin[c]).collect::<Vec<_>>(),
                plugin[c].difference(&cli[c]).collect::<Vec<_>>()
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "building the CLI and then the plugin (or the other way) would rebuild these and all \
         above them; add the union of their features to build-features/Cargo.toml:\n{}",
        differ.join("\n")
    );
}

#[test]
fn the_readme_shows_the_editor_as_the_snapshot_tests_draw_it() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first_lines: String = readme.lines().take(5).collect::<Vec<_>>().join("\n");
    assert!(
        first_lines.contains("](docs/editor.png)"),
        "the README's picture of the editor is gone from its top"
    );
    assert!(
        std::fs::read(root.join("docs/editor.png")).unwrap()
            == std::fs::read(root.join("plugin/tests/snapshots/editor_model_gpu.png")).unwrap(),
        "docs/editor.png is not the editor as drawn now: copy \
         plugin/tests/snapshots/editor_model_gpu.png over it"
    );
}
