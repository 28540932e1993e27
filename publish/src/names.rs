//! Kubernetes' naming rules, checked by hand (apimachinery `pkg/util/validation`): DNS-1123
//! labels and subdomains for object names, qualified names for label and annotation keys, label
//! values; and the deterministic mapping of a zone or group name into an object name.

/// DNS-1123 label: at most 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// DNS-1123 subdomain: at most 253, dot-separated DNS-1123 labels (each part may be up to 253
/// here as in Kubernetes' regex, which does not bound the parts).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.as_bytes()[0].is_ascii_alphanumeric()
                && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        })
}

/// The name part of a qualified name: at most 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// A label or annotation key: `[prefix/]name`, the prefix a DNS-1123 subdomain.
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        None => is_qualified_name_part(s),
        Some((prefix, name)) => {
            !name.contains('/') && is_dns1123_subdomain(prefix) && is_qualified_name_part(name)
        }
    }
}

/// A label value: empty, or a qualified name's name part.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_qualified_name_part(s)
}

/// FNV-1a, 64 bits: a stable hash (std's `DefaultHasher` may change between Rust releases).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `prefix` + `raw` as a DNS-1123 label: lower case, anything but `[a-z0-9-]` made `-`. When that
/// changed the name, or it had to be shortened to 63, 8 hex digits of a hash of `raw` are added,
/// so that two zones never share an object. `prefix` must be a DNS-1123 label prefix.
pub fn object_name(prefix: &str, raw: &str) -> String {
    let mapped: String = raw
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let plain = format!("{prefix}{mapped}");
    if mapped == raw && is_dns1123_label(&plain) {
        return plain;
    }
    let hash = format!("{:08x}", fnv1a(raw) as u32);
    let room = 63 - hash.len() - 1;
    let mut base: String = plain.chars().take(room).collect();
    while base.ends_with('-') {
        base.pop();
    }
    format!("{base}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_accept_and_refuse_as_kubernetes_does() {
        assert!(is_dns1123_label("zonemesh-zone-a1"));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(is_qualified_name("zonemesh.io/zone-group"));
        assert!(is_qualified_name("kubernetes.io/hostname"));
        assert!(is_qualified_name("Zone_1"));
        for bad in [
            "",
            "a/b/c",
            "/a",
            "Zonemesh.io/x",
            "a/",
            &format!("a/{}", "x".repeat(64)),
        ] {
            assert!(!is_qualified_name(bad), "{bad:?}");
        }
        assert!(is_label_value("") && is_label_value("eu-west_1.a"));
        assert!(!is_label_value("a b") && !is_label_value(&"v".repeat(64)));
    }

    #[test]
    fn object_names_are_valid_distinct_and_stable() {
        assert_eq!(
            object_name("zonemesh-zone-", "zone-a"),
            "zonemesh-zone-zone-a"
        );
        let upper = object_name("zonemesh-zone-", "Zone_A");
        let lower = object_name("zonemesh-zone-", "zone-a");
        assert_ne!(upper, lower, "Zone_A and zone-a are two zones");
        assert_eq!(upper, object_name("zonemesh-zone-", "Zone_A"));
        let long = object_name("zonemesh-zone-", &"z".repeat(63));
        assert!(is_dns1123_label(&long) && long.len() == 63, "{long}");
        assert!(is_dns1123_label(&object_name("zonemesh-zone-", "a.b.c")));
    }
}
