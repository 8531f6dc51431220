//! The one error type of the engine. Every variant carries the context a user needs to act:
//! which option, which target, which offset.

use std::fmt;

use serde::Serialize;

/// What went wrong, as a stable lowercase name (`as_str`, and the same in serde): the Python
/// bindings hand it over with the message and storlab.errors.from_core maps each to a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The job spec is invalid (bad option value or combination).
    Spec,
    /// A target cannot be opened, created, sized or is unsuitable.
    Target,
    /// O_DIRECT alignment is violated (size, offset or buffer).
    Alignment,
    /// An I/O request failed or transferred fewer bytes than asked.
    Io,
    /// The engine (e.g. io_uring set-up) is unavailable or failed.
    Engine,
    /// The front end asked to stop (a signal) while the plan was being built.
    Interrupted,
}

impl ErrorKind {
    /// Every kind, for the bindings' `error_kinds` (Python checks it maps each one).
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Spec, ErrorKind::Target, ErrorKind::Alignment, ErrorKind::Io, ErrorKind::Engine, ErrorKind::Interrupted,
    ];

    /// The kind's name across the Python boundary: never renamed, only added to.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Spec => "spec",
            ErrorKind::Target => "target",
            ErrorKind::Alignment => "alignment",
            ErrorKind::Io => "io",
            ErrorKind::Engine => "engine",
            ErrorKind::Interrupted => "interrupted",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn spec(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Spec, message: message.into() }
    }
    pub fn target(path: &str, message: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Target, message: format!("{path}: {message}") }
    }
    pub fn alignment(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Alignment, message: message.into() }
    }
    pub fn io(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Io, message: message.into() }
    }
    pub fn engine(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Engine, message: message.into() }
    }
    pub fn interrupted(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Interrupted, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Text of the last OS error (errno) with its symbolic number, e.g. "Invalid argument (os error 22)".
pub fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are a contract with python/storlab/errors.py: `as_str` and serde's rename agree.
    #[test]
    fn kind_names_are_stable_and_match_serde() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["spec", "target", "alignment", "io", "engine", "interrupted"]);
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::Value::String(k.as_str().into()));
        }
    }
}
