//! `lossless sim`: the simulator's command line. `run` builds a scenario (a file, options, or
//! both) and runs it once per policy compared, printing and writing what it measured
//! ([`output`]); `sweep` runs a grid of scenarios on this machine's cores or writes it as a
//! Slurm job array or a Kubernetes Indexed Job ([`sweep`]); `point` runs one point of a written
//! sweep (what those jobs run); `report` merges a sweep's points. The engine is the `sim`
//! crate; docs/sim.md is the reference.

pub mod cli;
pub mod output;
pub mod run;
pub mod sweep;
