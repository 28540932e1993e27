//! How the command fails: an exit status for each kind of failure (sysexits where one fits),
//! and the error that carries it.

/// Exit statuses besides 0 (sysexits where one fits), listed in `zonemesh --help`.
pub mod exit {
    /// Anything not listed below.
    pub const FAILURE: i32 = 1;
    /// No placement satisfies the request (not enough capacity, no zone large enough).
    pub const NO_PLACEMENT: i32 = 3;
    /// A flag or argument is wrong (as every zonemesh binary).
    pub const USAGE: i32 = zonemesh_common::flags::EXIT_USAGE;
    /// The aggregator refused the request: an invalid value, an unknown node or zone.
    pub const REFUSED: i32 = 65;
    /// The aggregator cannot be reached, or is unavailable or shutting down.
    pub const UNAVAILABLE: i32 = 69;
    /// The credentials are missing, wrong, or do not allow this.
    pub const NO_PERMISSION: i32 = 77;
}

/// The text after `zonemesh --help`.
pub const EXIT_HELP: &str = "Exit status: 0 answered; 1 other failure; 3 no placement possible; \
64 wrong flag or argument; 65 refused by the aggregator (invalid value, unknown node or zone); \
69 aggregator unreachable or unavailable; 77 credentials missing, wrong or not allowed.";

/// An error with the exit status it means.
#[derive(Debug)]
pub struct Failure {
    /// Exit status.
    pub status: i32,
    /// What to print.
    pub message: String,
}

impl Failure {
    pub(crate) fn new(status: i32, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn from_status(what: &str, s: &tonic::Status) -> Self {
        use tonic::Code;
        // With TLS 1.3 the server judges the client's certificate after the client's side of the
        // handshake is done, so a refusal arrives as the first call's transport error.
        if let Some(why) = zonemesh_tls::credential_failure(s) {
            return Self::new(exit::NO_PERMISSION, format!("{what}: {why}"));
        }
        let status = match s.code() {
            Code::InvalidArgument | Code::NotFound | Code::OutOfRange => exit::REFUSED,
            Code::FailedPrecondition => exit::NO_PLACEMENT,
            Code::Unauthenticated | Code::PermissionDenied => exit::NO_PERMISSION,
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => exit::UNAVAILABLE,
            _ => exit::FAILURE,
        };
        let hint = match s.code() {
            Code::Unauthenticated => " (give --token, or --tls-cert and --tls-key)",
            _ => "",
        };
        Self::new(status, format!("{what}: {}{hint}", s.message()))
    }
}
