//! A collector's answer to a push: a partial success (it kept some points
//! only) has a count and a free-text message, which the collector writes.
//! A hostile or broken collector could send terminal escapes, newlines
//! that forge log lines, or megabytes: the message is made printable
//! (output/escape.rs) and cut before serve logs it, and serve logs it once
//! per change (commands/serve/otlp.rs).

use prost::Message;

use super::proto::ExportMetricsServiceResponse;

/// At most this many characters of a collector's message are logged.
pub(crate) const MESSAGE_SHOWN: usize = 256;

/// A partial success, as serve logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartialSuccess {
    pub rejected_data_points: i64,
    /// Printable (no control or bidirectional characters), at most
    /// [`MESSAGE_SHOWN`] characters and an ellipsis.
    pub message: String,
}

/// The partial success of a successful answer's body; None if there is
/// none (an empty body, or one that is not the message).
pub(crate) fn partial_success(body: &[u8]) -> Option<PartialSuccess> {
    let partial = ExportMetricsServiceResponse::decode(body)
        .ok()?
        .partial_success?;
    if partial.rejected_data_points == 0 && partial.error_message.is_empty() {
        return None;
    }
    let printable = crate::output::escape::printable(&partial.error_message);
    let message = match printable.char_indices().nth(MESSAGE_SHOWN) {
        Some((cut, _)) => format!("{}…", &printable[..cut]),
        None => printable.into_owned(),
    };
    Some(PartialSuccess {
        rejected_data_points: partial.rejected_data_points,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::{super::proto::ExportMetricsPartialSuccess, *};

    fn answer(rejected: i64, message: &str) -> Vec<u8> {
        ExportMetricsServiceResponse {
            partial_success: Some(ExportMetricsPartialSuccess {
                rejected_data_points: rejected,
                error_message: message.to_string(),
            }),
        }
        .encode_to_vec()
    }

    /// Issue 48, 12: the message was printed raw: terminal escapes, and
    /// 41,526 forged "schedlat: FAKE LINE" lines in 25 s.
    #[test]
    fn a_message_is_made_printable_and_cut() {
        let forged = format!("bad\n\x1b[2Jschedlat: FAKE LINE\r\n{}", "x".repeat(1 << 20));
        let p = partial_success(&answer(3, &forged)).unwrap();
        assert_eq!(p.rejected_data_points, 3);
        assert!(
            p.message.starts_with("bad??[2Jschedlat: FAKE LINE??xxx"),
            "{}",
            &p.message[..40]
        );
        assert!(!p.message.chars().any(char::is_control), "{:?}", p.message);
        assert_eq!(p.message.chars().count(), MESSAGE_SHOWN + 1);
        assert!(p.message.ends_with('…'));
        assert_eq!(partial_success(&answer(0, "")), None);
        assert_eq!(partial_success(b""), None);
        assert_eq!(partial_success(b"\xff\xff\xff"), None);
        assert_eq!(partial_success(&answer(0, "note")).unwrap().message, "note");
    }
}
