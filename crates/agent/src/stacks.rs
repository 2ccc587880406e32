//! The call-stack requests: a session's recorder runs beside whatever
//! else the session does (a `perf record` child), like its monitor.

use benchlab_stacks::record::{self, Recorder};

use crate::{Request, Response};

fn error(e: impl std::fmt::Display) -> Response {
    Response::Error {
        message: format!("stacks: {e}"),
        skipped: false,
    }
}

/// Answers `StacksCheck`, `StacksStart` and `StacksStop`.
pub(crate) fn handle(recorder: &mut Option<Recorder>, req: Request) -> Response {
    match req {
        Request::StacksCheck { hz, unwind } => match record::check(hz, unwind) {
            Ok(perf) => Response::StacksChecked { perf },
            Err(e) => error(e),
        },
        Request::StacksStart { plan } => {
            // A recorder left from an abandoned repetition ends first.
            drop(recorder.take());
            match Recorder::start(plan) {
                Ok(r) => {
                    *recorder = Some(r);
                    Response::StacksStarted
                }
                Err(e) => error(e),
            }
        }
        Request::StacksStop => match recorder.take() {
            Some(r) => match r.stop() {
                Ok(recording) => Response::Stacks {
                    recording: Box::new(recording),
                },
                Err(e) => error(e),
            },
            None => error("no recorder runs in this session"),
        },
        _ => error("not a stacks request"),
    }
}
