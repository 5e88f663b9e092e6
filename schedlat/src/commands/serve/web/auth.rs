//! Basic authentication against `basic_auth_users`: the `Authorization:
//! Basic` header decoded, the password checked against the user's bcrypt
//! hash. bcrypt costs tens of milliseconds by design and a scraper sends the
//! same pair at every scrape, so the pairs that passed are remembered, as
//! a SHA-256 of hash, user and password (no password is kept), until the
//! configuration changes.

use std::collections::HashSet;

use base64::Engine as _;

/// A user and password from an `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// `Basic base64(user:password)` (RFC 7617); None for any other scheme or
/// a value that does not decode.
pub(crate) fn basic_credentials(header: &str) -> Option<Credentials> {
    let (scheme, value) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some(Credentials {
        user: user.to_string(),
        password: password.to_string(),
    })
}

/// A bcrypt hash at cost 10, the usual `htpasswd -B` cost: an unknown user
/// is checked against it, so that the time of an answer does not tell
/// which users exist.
pub(crate) const UNKNOWN_USER_HASH: &str =
    "$2y$10$hs/M6HBmjqwygHfqiU5bI.xf6zDgic3gLU94N8zgTzwDXO/ioxrT2";

/// The bcrypt check itself (slow: run it off the serving thread).
pub(crate) fn verify(password: &str, hash: &str) -> bool {
    bcrypt::verify(password, hash).unwrap_or(false)
}

/// The pairs that passed, by digest.
#[derive(Debug, Default)]
pub(crate) struct Verified(HashSet<[u8; 32]>);

/// A few scrapers send a pair each; many more is someone filling the
/// memory, and the set then starts over.
const VERIFIED_MAX: usize = 64;

impl Verified {
    pub(crate) fn contains(&self, hash: &str, credentials: &Credentials) -> bool {
        self.0.contains(&digest(hash, credentials))
    }

    pub(crate) fn insert(&mut self, hash: &str, credentials: &Credentials) {
        if self.0.len() >= VERIFIED_MAX {
            self.0.clear();
        }
        self.0.insert(digest(hash, credentials));
    }
}

fn digest(hash: &str, credentials: &Credentials) -> [u8; 32] {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    // Lengths first: ("ab", "c") and ("a", "bc") must differ.
    for part in [hash, &credentials.user, &credentials.password] {
        context.update(&(part.len() as u64).to_le_bytes());
        context.update(part.as_bytes());
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn basic_credentials_are_decoded() {
        let c = basic_credentials(&header("prometheus:pa:ss")).unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_str()),
            ("prometheus", "pa:ss")
        );
        assert!(basic_credentials(&format!("basic {}", &header("a:b")[6..])).is_some());
        for bad in ["Bearer abc", "Basic !!!", "Basic", &header("no-colon"), ""] {
            assert!(basic_credentials(bad).is_none(), "{bad}");
        }
        assert!(!format!("{c:?}").contains("pa:ss"));
    }

    #[test]
    fn the_unknown_user_hash_is_a_cost_10_bcrypt_hash() {
        let parts: bcrypt::HashParts = UNKNOWN_USER_HASH.parse().unwrap();
        assert_eq!(parts.get_cost(), 10);
        assert!(!verify("", UNKNOWN_USER_HASH));
    }

    #[test]
    fn verified_pairs_are_remembered_per_hash() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        assert!(verify("s3cret", &hash) && !verify("wrong", &hash));
        let right = basic_credentials(&header("p:s3cret")).unwrap();
        let split = Credentials {
            user: "p:s".into(),
            password: "3cret".into(),
        };
        let mut verified = Verified::default();
        verified.insert(&hash, &right);
        assert!(verified.contains(&hash, &right));
        assert!(!verified.contains(&hash, &split));
        assert!(!verified.contains("$2y$04$other", &right));
        for n in 0..VERIFIED_MAX {
            verified.insert(
                &hash,
                &Credentials {
                    user: n.to_string(),
                    password: String::new(),
                },
            );
        }
        assert!(verified.0.len() <= VERIFIED_MAX);
    }
}
