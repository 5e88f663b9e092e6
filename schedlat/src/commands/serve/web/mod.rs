//! `--web.config.file`: TLS and basic authentication from the web
//! configuration file Prometheus exporters read (config.rs says the
//! format; tls.rs makes the rustls configuration; auth.rs checks
//! passwords).
//!
//! The file, and the certificate files it names, are looked at again at
//! every new connection and every request (their inode, size and
//! modification time: a renewed certificate, a Kubernetes Secret swapped
//! in, a changed password), and re-read on SIGHUP: no restart is needed.
//! A configuration that does not read (a half-written file, a key that
//! does not match its certificate) keeps the last good one, with one log
//! line per change saying why; so does one that would leave a listener
//! beyond loopback without authentication, unless serve was started with
//! `--web.allow-unauthenticated`.

mod auth;
pub(crate) mod config;
pub(crate) mod tls;

use std::{
    cell::RefCell,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    rc::Rc,
};

use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use self::{
    auth::{UNKNOWN_USER_HASH, Verified, basic_credentials},
    config::WebConfig,
};

/// A configuration read and checked, with its TLS acceptor made.
pub(crate) struct Loaded {
    pub config: WebConfig,
    /// None: plain HTTP.
    pub tls: Option<TlsAcceptor>,
}

/// The web configuration in force, and how to tell that its files changed.
pub(crate) struct Web {
    path: PathBuf,
    /// The listener is reachable from other machines and
    /// `--web.allow-unauthenticated` was not given: a configuration must
    /// authenticate to be taken.
    must_authenticate: bool,
    state: RefCell<State>,
    /// One bcrypt check at a time, on a blocking thread: a flood of wrong
    /// passwords costs one CPU at most, and scrapes with a remembered
    /// password never wait for it.
    bcrypt: Semaphore,
}

struct State {
    /// Of the file and of every file it names, when last read.
    stamps: Vec<Option<Stamp>>,
    current: Rc<Loaded>,
    verified: Verified,
}

/// What tells that a file changed: its inode (a file renamed into place,
/// a Secret's symlink swapped), size and modification time.
type Stamp = (u64, u64, u64, i64, i64);

impl Web {
    /// Reads `path` at start; the error says what is wrong with it (the
    /// caller names the file). `must_authenticate`: see [`Web`].
    pub(crate) fn open(path: &Path, must_authenticate: bool) -> Result<Web, String> {
        let (loaded, stamps) = load(path, must_authenticate)?;
        Ok(Web {
            path: path.to_path_buf(),
            must_authenticate,
            state: RefCell::new(State {
                stamps,
                current: Rc::new(loaded),
                verified: Verified::default(),
            }),
            bcrypt: Semaphore::new(1),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration now: read again first if a file of it changed.
    pub(crate) fn current(&self) -> Rc<Loaded> {
        let changed = {
            let state = self.state.borrow();
            stamps(&self.path, &state.current.config) != state.stamps
        };
        if changed {
            self.reload("it changed");
        }
        self.state.borrow().current.clone()
    }

    /// Reads the file again (SIGHUP, or a change seen); a configuration
    /// that does not load keeps the last good one. Either way one line says
    /// what happened.
    pub(crate) fn reload(&self, why: &str) {
        let mut state = self.state.borrow_mut();
        match load(&self.path, self.must_authenticate) {
            Ok((loaded, stamps)) => {
                say!(
                    "schedlat: web configuration {} read again ({why}): {}",
                    self.path.display(),
                    loaded.config.describe()
                );
                state.stamps = stamps;
                state.current = Rc::new(loaded);
                state.verified = Verified::default();
            }
            Err(e) => {
                say!(
                    "schedlat: web configuration {} not taken ({why}): {e}; keeping the previous one ({})",
                    self.path.display(),
                    state.current.config.describe()
                );
                // Said once per change: the next line comes when the files
                // change again.
                state.stamps = stamps(&self.path, &state.current.config);
            }
        }
    }

    /// Whether a request with this `Authorization` header may be answered:
    /// always, without `basic_auth_users`; else a user's right password.
    pub(crate) async fn admits(&self, authorization: Option<&str>) -> bool {
        let loaded = self.current();
        let users = &loaded.config.users;
        if users.is_empty() {
            return true;
        }
        let Some(credentials) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let (hash, known) = match users.get(&credentials.user) {
            Some(hash) => (hash.clone(), true),
            None => (UNKNOWN_USER_HASH.to_string(), false),
        };
        if known && self.state.borrow().verified.contains(&hash, &credentials) {
            return true;
        }
        let Ok(_one_at_a_time) = self.bcrypt.acquire().await else {
            return false;
        };
        let (password, checked) = (credentials.password.clone(), hash.clone());
        let right = tokio::task::spawn_blocking(move || auth::verify(&password, &checked))
            .await
            .unwrap_or(false);
        if right && known {
            self.state.borrow_mut().verified.insert(&hash, &credentials);
        }
        right && known
    }
}

/// Reads and checks the configuration at `path`, with the stamps of the
/// files read.
fn load(path: &Path, must_authenticate: bool) -> Result<(Loaded, Vec<Option<Stamp>>), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let config = WebConfig::parse(&text, dir)?;
    if must_authenticate && !config.authenticates() {
        return Err("the listener is reachable from other machines, and this configuration lets anyone in: add basic_auth_users or client_auth_type RequireAndVerifyClientCert (or start serve with --web.allow-unauthenticated)".to_string());
    }
    let tls = config
        .tls
        .as_ref()
        .map(tls::server_config)
        .transpose()?
        .map(TlsAcceptor::from);
    let stamps = stamps(path, &config);
    Ok((Loaded { config, tls }, stamps))
}

fn stamps(path: &Path, config: &WebConfig) -> Vec<Option<Stamp>> {
    std::iter::once(path)
        .chain(config.files())
        .map(|file| {
            let m = fs::metadata(file).ok()?;
            Some((m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
        })
        .collect()
}

/// The web configuration parser, for the fuzz targets: any text must give
/// a configuration or an error, never a panic.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn parse_for_fuzzing(text: &str) -> Result<WebConfig, String> {
    WebConfig::parse(text, Path::new("/nonexistent"))
}

/// An `Authorization` header decoded, for the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn credentials_for_fuzzing(header: &str) -> Option<(String, String)> {
    basic_credentials(header).map(|c| (c.user, c.password))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("schedlat-web-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn header(user_password: &str) -> String {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A changed password takes effect at the next request; a broken file
    /// keeps the last good configuration.
    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_is_not_taken() {
        let d = dir("reload");
        let file = d.0.join("web.yml");
        let users = |password: &str| {
            format!(
                "basic_auth_users:\n  prometheus: {}\n",
                bcrypt::hash(password, 4).unwrap()
            )
        };
        fs::write(&file, users("first")).unwrap();
        let web = Web::open(&file, true).unwrap();
        block_on(async {
            assert!(web.admits(Some(&header("prometheus:first"))).await);
            assert!(!web.admits(Some(&header("prometheus:second"))).await);
            assert!(!web.admits(None).await);
            assert!(!web.admits(Some(&header("nobody:first"))).await);
            fs::write(
                &file,
                users("second") + "# longer, so the size changes too\n",
            )
            .unwrap();
            assert!(web.admits(Some(&header("prometheus:second"))).await);
            assert!(!web.admits(Some(&header("prometheus:first"))).await);
            // Broken: the previous one stays.
            fs::write(&file, "basic_auth_users: [\n").unwrap();
            assert!(web.admits(Some(&header("prometheus:second"))).await);
            // Valid, but without auth on a listener that needs it: not taken.
            fs::write(&file, "").unwrap();
            assert!(!web.admits(None).await);
        });
        let open = Web::open(&file, false).unwrap();
        assert!(block_on(open.admits(None)));
        let e = Web::open(&file, true).err().unwrap();
        assert!(e.contains("lets anyone in"), "{e}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = Web::open(Path::new("/nonexistent/web.yml"), false)
            .err()
            .unwrap();
        assert!(e.starts_with("cannot read it: "), "{e}");
    }
}
