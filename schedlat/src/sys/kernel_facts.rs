//! What the running kernel says of itself outside BTF: its release (for
//! facts that are macros in its sources, not types) and its build
//! configuration (CONFIG_HZ), from /proc/config.gz or /boot/config-RELEASE.

use std::io::Read;

/// A kernel release, major and minor (`6.18.44-...` is `Release(6, 18)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub u32, pub u32);

impl Release {
    /// The leading `MAJOR.MINOR` of a release string; None otherwise.
    pub fn parse(text: &str) -> Option<Release> {
        let mut parts = text.trim().split(['.', '-', '+']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Release(major, minor))
    }
}

/// The running kernel's release; 0.0 when /proc does not say.
pub fn release() -> Release {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|t| Release::parse(&t))
        .unwrap_or(Release(0, 0))
}

/// CONFIG_HZ of the running kernel, from its configuration where the
/// kernel or the distribution publishes it; None otherwise.
pub fn hz() -> Option<u64> {
    let config = config_text()?;
    config_value(&config, "CONFIG_HZ")?.parse().ok()
}

/// The value of `name=` in a kernel configuration.
pub fn config_value<'a>(config: &'a str, name: &str) -> Option<&'a str> {
    config.lines().find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
    })
}

/// The running kernel's configuration text, where it is published.
pub fn config_text() -> Option<String> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some(text);
        }
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    config_paths(release.trim())
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
}

/// Where distributions install a kernel's configuration: /boot/config-R
/// (Debian up to 6.x, Fedora, Ubuntu), and beside its modules, where
/// Debian's split 7.x packages (linux-base-R) and Arch put it.
fn config_paths(release: &str) -> [String; 3] {
    [
        format!("/boot/config-{release}"),
        format!("/usr/lib/modules/{release}/config"),
        format!("/lib/modules/{release}/config"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_and_order() {
        assert_eq!(Release::parse("6.18.44-fc-v857\n"), Some(Release(6, 18)));
        assert_eq!(Release::parse("5.10.0-35-amd64"), Some(Release(5, 10)));
        assert_eq!(Release::parse("6.1.0-rt-amd64"), Some(Release(6, 1)));
        assert_eq!(Release::parse("garbage"), None);
        assert!(Release(6, 6) > Release(5, 15));
        assert!(Release(6, 13) > Release(6, 12));
    }

    #[test]
    fn config_values_are_found_by_exact_name() {
        let config = "CONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_HZ_1000 is not set\n";
        assert_eq!(config_value(config, "CONFIG_HZ"), Some("250"));
        assert_eq!(config_value(config, "CONFIG_HZ_1000"), None);
        assert_eq!(config_value(config, "CONFIG_NONE"), None);
    }
}
