//! Malformed programs never panic the front end: deterministic mutations (token deletion,
//! duplication and replacement) of every corpus program must each give `Ok` or a diagnostic.

use softswitch_frontend::source::SourceMap;
use std::path::{Path, PathBuf};

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

/// The corpus's P4 programs, sorted.
fn corpus_programs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    testkit::files_with_extension(&dir, "p4")
}

/// Deterministic mutations of a text split into words: each deletes, duplicates or replaces
/// one word, chosen by a xorshift generator from a fixed seed.
struct Mutator {
    seed: u32,
}

impl Mutator {
    fn next(&mut self) -> usize {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        self.seed as usize
    }

    /// One mutation of `words`, a word of `replacements` standing in for a replaced one: the
    /// index of the word mutated and the text.
    fn mutate(&mut self, words: &[&str], replacements: &[&'static str]) -> (usize, String) {
        let mut w = words.to_vec();
        let i = self.next() % w.len();
        match self.next() % 3 {
            0 => {
                w.remove(i);
            }
            1 => w.insert(i, w[i]),
            _ => w[i] = replacements[self.next() % replacements.len()],
        }
        (i, w.concat())
    }
}

#[test]
fn mutated_corpus_programs_never_panic() {
    let mut mutator = Mutator { seed: 0x2545_f491 };
    for path in corpus_programs() {
        let src = std::fs::read_to_string(&path).unwrap();
        let words: Vec<&str> = src
            .split_inclusive(|c: char| c.is_whitespace() || "(){};,.<>".contains(c))
            .collect();
        for _ in 0..60 {
            let (i, mutated) = mutator.mutate(&words, &TOKENS);
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
    let mut mutator = Mutator { seed: 0x1357_9bdf };
    for path in corpus_programs() {
        let program = softswitch_frontend::compile_file(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .program;
        let stf = std::fs::read_to_string(path.with_extension("stf")).unwrap();
        let words: Vec<&str> = stf
            .split_inclusive(|c: char| c.is_whitespace() || "(),:".contains(c))
            .collect();
        for _ in 0..40 {
            let (_, mutated) = mutator.mutate(&words, &STF_WORDS);
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
