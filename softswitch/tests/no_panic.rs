//! Malformed programs never panic the front end: deterministic mutations (token deletion,
//! duplication and replacement) of every corpus program must each give `Ok` or a diagnostic.

use softswitch_frontend::source::SourceMap;
use std::path::Path;

/// Replacement tokens: operators, keywords and literals that often break invariants.
const TOKENS: [&str; 16] = [
    "1", "8w1", "(", ")", "{", "}", ";", ".", "true", "int", "bit<8>", "?", "_", "header", "<<",
    "==",
];

fn compiles_without_panic(src: &str) {
    let mut map = SourceMap::new();
    let f = map.add("m.p4", src);
    if let Err(d) = softswitch_frontend::compile(&mut map, f) {
        let rendered = d.render(&map);
        assert!(
            rendered.starts_with("m.p4:") || rendered.starts_with('<'),
            "{rendered}"
        );
    }
}

#[test]
fn mutated_corpus_programs_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut seed: u32 = 0x2545_f491;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as usize
    };
    let mut programs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4"))
        .collect();
    programs.sort();
    for path in programs {
        let src = std::fs::read_to_string(&path).unwrap();
        let words: Vec<&str> = src
            .split_inclusive(|c: char| c.is_whitespace() || "(){};,.<>".contains(c))
            .collect();
        for _ in 0..60 {
            let mut w = words.clone();
            let i = next() % w.len();
            match next() % 3 {
                0 => {
                    w.remove(i);
                }
                1 => w.insert(i, w[i]),
                _ => w[i] = TOKENS[next() % TOKENS.len()],
            }
            let mutated: String = w.concat();
            let result = std::panic::catch_unwind(|| compiles_without_panic(&mutated));
            assert!(
                result.is_ok(),
                "{} mutated at word {i} panics:\n{mutated}",
                path.display()
            );
        }
    }
}

/// Replacement words for STF mutations.
const STF_WORDS: [&str; 12] = [
    "0x",
    "*",
    "$",
    "(",
    ")",
    ":",
    "/",
    "&&&",
    "999999999999",
    "-1",
    "add",
    "expect",
];

#[test]
fn mutated_stf_files_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut seed: u32 = 0x1357_9bdf;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed as usize
    };
    let mut programs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "p4"))
        .collect();
    programs.sort();
    for path in programs {
        let mut map = SourceMap::new();
        let file = map.add(
            path.display().to_string(),
            std::fs::read_to_string(&path).unwrap(),
        );
        let program = softswitch_frontend::compile(&mut map, file)
            .unwrap()
            .program;
        let stf = std::fs::read_to_string(path.with_extension("stf")).unwrap();
        let words: Vec<&str> = stf
            .split_inclusive(|c: char| c.is_whitespace() || "(),:".contains(c))
            .collect();
        for _ in 0..40 {
            let mut w = words.clone();
            let i = next() % w.len();
            match next() % 3 {
                0 => {
                    w.remove(i);
                }
                1 => w.insert(i, w[i]),
                _ => w[i] = STF_WORDS[next() % STF_WORDS.len()],
            }
            let mutated: String = w.concat();
            let mut map = SourceMap::new();
            let stf_file = map.add("m.stf", mutated.clone());
            let mut switch = softswitch_core::switch::Switch::new(
                program.clone(),
                softswitch_core::switch::Clock::Virtual(0),
            );
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ =
                    softswitch_stf::run(&map, stf_file, &mut switch).map_err(|d| d.render(&map));
            }));
            assert!(
                result.is_ok(),
                "{} with a mutated STF panics:\n{mutated}",
                path.display()
            );
        }
    }
}
