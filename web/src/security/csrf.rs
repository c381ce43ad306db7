//! CSRF tokens issued and bound by the server. A session id (random, signed) lives in an HttpOnly
//! cookie; the token the page's script repeats in `X-XSRF-TOKEN` is the HMAC-SHA256 of that id
//! under a key drawn at random when the process starts. A page cannot mint a pair the app
//! accepts: it can neither read the session cookie nor sign a token for a session of its own.

use std::sync::OnceLock;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::{Error, Result};

/// Signs session ids and CSRF tokens.
pub struct Signer {
    key: hmac::Key,
}

/// Bytes of randomness in a session id.
const SESSION_BYTES: usize = 16;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

impl Signer {
    /// A signer with a fresh random key.
    pub fn random() -> Signer {
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new()).expect("the system's random source");
        Signer { key }
    }

    /// A signer with `key` (tests: two signers with different keys).
    pub fn with_key(key: &[u8]) -> Signer {
        Signer { key: hmac::Key::new(hmac::HMAC_SHA256, key) }
    }

    fn tag(&self, purpose: &str, value: &str) -> hmac::Tag {
        hmac::sign(&self.key, format!("{purpose}:{value}").as_bytes())
    }

    fn verify(&self, purpose: &str, value: &str, tag: &str) -> bool {
        unhex(tag).is_some_and(|tag| hmac::verify(&self.key, format!("{purpose}:{value}").as_bytes(), &tag).is_ok())
    }

    /// A new session id: `<random>.<its signature>`.
    pub fn new_session(&self) -> String {
        let mut id = [0u8; SESSION_BYTES];
        SystemRandom::new().fill(&mut id).expect("the system's random source");
        let id = hex(&id);
        let tag = hex(self.tag("session", &id).as_ref());
        format!("{id}.{tag}")
    }

    /// Whether `session` is an id this signer issued (with this process's key).
    pub fn issued(&self, session: &str) -> bool {
        session.split_once('.').is_some_and(|(id, tag)| self.verify("session", id, tag))
    }

    /// The CSRF token of `session`.
    pub fn token(&self, session: &str) -> String {
        hex(self.tag("xsrf", session).as_ref())
    }

    /// Checks a mutating request: a session this signer issued, and a header carrying its token.
    pub fn check(&self, session: Option<&str>, header: Option<&[u8]>) -> Result<()> {
        let session = session.ok_or(Error::Csrf("no session cookie: load a page of the app first"))?;
        if !self.issued(session) {
            return Err(Error::Csrf(
                "the session cookie was not issued by this app (or it restarted): reload the page",
            ));
        }
        let header = header.ok_or(Error::Csrf("no X-XSRF-TOKEN header"))?;
        let header = std::str::from_utf8(header).unwrap_or("");
        if self.verify("xsrf", session, header) {
            Ok(())
        } else {
            Err(Error::Csrf("the X-XSRF-TOKEN header is not the token this app issued for this session"))
        }
    }

    /// Whether `secret` equals `expected`, in time that does not depend on where they differ
    /// (both are signed and the tags compared in constant time).
    pub fn same_secret(&self, secret: &[u8], expected: &str) -> bool {
        let tag = hmac::sign(&self.key, expected.as_bytes());
        hmac::verify(&self.key, secret, tag.as_ref()).is_ok()
    }
}

/// This process's signer: its key is drawn at the first request and never leaves the process.
pub fn signer() -> &'static Signer {
    static SIGNER: OnceLock<Signer> = OnceLock::new();
    SIGNER.get_or_init(Signer::random)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_accepted_only_for_the_session_it_was_issued_for() {
        let signer = Signer::with_key(b"one key");
        let session = signer.new_session();
        assert!(signer.issued(&session));
        let token = signer.token(&session);
        assert!(signer.check(Some(&session), Some(token.as_bytes())).is_ok());

        let other = signer.new_session();
        assert_ne!(other, session, "ids are random");
        let error = signer.check(Some(&other), Some(token.as_bytes())).unwrap_err();
        assert!(error.to_string().contains("not the token this app issued"), "{error}");
        assert!(signer.check(Some(&session), None).unwrap_err().to_string().contains("no X-XSRF-TOKEN header"));
        assert!(signer.check(None, Some(token.as_bytes())).unwrap_err().to_string().contains("no session cookie"));
    }

    #[test]
    fn a_self_minted_pair_is_refused() {
        let signer = Signer::with_key(b"the app's key");
        // What a page can do: choose a session and a token of its own, or sign with a key it guessed.
        let minted = "00112233445566778899aabbccddeeff.0011";
        assert!(!signer.issued(minted));
        let error = signer.check(Some(minted), Some(b"0011")).unwrap_err();
        assert_eq!(error.status(), http::StatusCode::FORBIDDEN);
        assert!(error.to_string().contains("not issued by this app"), "{error}");
        let guessed = Signer::with_key(b"a guessed key");
        let session = guessed.new_session();
        assert!(signer.check(Some(&session), Some(guessed.token(&session).as_bytes())).is_err());
        // The double-submit pair of old (cookie and header alike) is no longer enough.
        let session = signer.new_session();
        assert!(signer.check(Some(&session), Some(session.as_bytes())).is_err());
    }

    #[test]
    fn secrets_compare_whole() {
        let signer = Signer::with_key(b"k");
        assert!(signer.same_secret(b"0123456789abcdef", "0123456789abcdef"));
        for wrong in [&b""[..], b"0123456789abcde", b"0123456789abcdeF", b"0123456789abcdef0"] {
            assert!(!signer.same_secret(wrong, "0123456789abcdef"), "{wrong:?}");
        }
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(&[0, 1, 254, 255])), Some(vec![0, 1, 254, 255]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }
}
