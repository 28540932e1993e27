//! Slurm hostlists (`tux[0-3,12],login`), compressed and expanded as Slurm 22.05's parser reads
//! them. Checked against `scontrol show hostnames` / `scontrol show hostlist` 22.05.8 (and again
//! by `tests/tests/slurm.rs` against the installed scontrol):
//!
//! - a range's width is the length of its lower bound: `n[9-10]` is `n9,n10`, `n[09-10]` is
//!   `n09,n10`, `n[009-10]` is `n009,n010`; each range of a bracket has its own width;
//! - a range holds at most 65,536 hosts (`n[1-65537]` is refused);
//! - a bracket must end the name or be followed by another bracket (`r[1-2]n[1-2]` is the four
//!   products; `n[1-2]x` is refused);
//! - the number after a name's last non-digit is read as an unsigned 64-bit integer, so a name
//!   whose trailing digits exceed 18446744073709551615 comes back as another name
//!   (`n99999999999999999999` is read as `n18446744073709551615`): such a name cannot be a Slurm
//!   node or switch ([`slurm_can_take`]).

use std::collections::BTreeMap;

/// Most hosts in one range of a bracket.
pub const MAX_RANGE_HOSTS: u64 = 65_536;

/// A hostlist that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    /// A `[` without its `]`, a `]` without its `[`, or a bracket inside a bracket.
    #[error("{expr:?}: unbalanced brackets")]
    Unbalanced {
        /// The expression.
        expr: String,
    },
    /// A range that is not `lo-hi` or `n` with digits, or with hi below lo.
    #[error("{expr:?}: {range:?} is not a range (digits, lo-hi with lo <= hi)")]
    BadRange {
        /// The expression.
        expr: String,
        /// The range.
        range: String,
    },
    /// A range of more than [`MAX_RANGE_HOSTS`] hosts.
    #[error("{expr:?}: {range:?} holds more than {MAX_RANGE_HOSTS} hosts, Slurm's limit per range")]
    TooLarge {
        /// The expression.
        expr: String,
        /// The range.
        range: String,
    },
    /// Text after a bracket that is not another bracket.
    #[error("{expr:?}: {rest:?} after a bracket (Slurm 22.05 takes nothing but another bracket)")]
    Suffix {
        /// The expression.
        expr: String,
        /// What follows the bracket.
        rest: String,
    },
    /// A character Slurm's parsers treat as syntax (`=`, `#`, whitespace, quotes).
    #[error("{expr:?} contains {ch:?}, which Slurm's configuration parser reads as syntax")]
    BadChar {
        /// The expression.
        expr: String,
        /// The character.
        ch: char,
    },
}

/// Characters that end a value or start a comment in Slurm's configuration files, or quote it.
fn syntax_char(c: char) -> bool {
    c.is_whitespace() || matches!(c, '=' | '#' | '"' | '\'' | '\\')
}

/// Whether Slurm reads `name` back as itself: no hostlist or configuration syntax in it, and a
/// trailing number (if any) that fits 64 bits. Names are never empty.
pub fn slurm_can_take(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| syntax_char(c) || matches!(c, ',' | '[' | ']'))
        && split_number(name).is_none_or(|(_, digits)| digits.parse::<u64>().is_ok())
}

/// `name` as (prefix, trailing digits), when it ends in a digit.
fn split_number(name: &str) -> Option<(&str, &str)> {
    let start = name
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit())
        .last()
        .map(|(i, _)| i)?;
    Some((&name[..start], &name[start..]))
}

/// The names of a hostlist, in its order (duplicates kept, as Slurm keeps them). Commas at the
/// top level separate entries; empty entries are skipped, as Slurm skips them.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    if let Some(ch) = expr.chars().find(|c| syntax_char(*c)) {
        return Err(HostlistError::BadChar {
            expr: expr.to_owned(),
            ch,
        });
    }
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            ']' if depth == 1 => depth = 0,
            '[' | ']' => {
                return Err(HostlistError::Unbalanced {
                    expr: expr.to_owned(),
                });
            }
            ',' if depth == 0 => {
                expand_entry(expr, &expr[start..i], &mut out)?;
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Unbalanced {
            expr: expr.to_owned(),
        });
    }
    expand_entry(expr, &expr[start..], &mut out)?;
    Ok(out)
}

/// One top-level entry (`n[1-3]`, `r[1-2]n[1-2]`, `login`), appended to `out`.
fn expand_entry(expr: &str, entry: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    if entry.is_empty() {
        return Ok(());
    }
    let Some(open) = entry.find('[') else {
        out.push(entry.to_owned());
        return Ok(());
    };
    let close =
        entry[open..]
            .find(']')
            .map(|i| open + i)
            .ok_or_else(|| HostlistError::Unbalanced {
                expr: expr.to_owned(),
            })?;
    let prefix = &entry[..open];
    let rest = &entry[close + 1..];
    let tails = if rest.is_empty() {
        vec![String::new()]
    } else if rest.contains('[') {
        let mut tails = Vec::new();
        expand_entry(expr, rest, &mut tails)?;
        tails
    } else {
        return Err(HostlistError::Suffix {
            expr: expr.to_owned(),
            rest: rest.to_owned(),
        });
    };
    for range in entry[open + 1..close].split(',') {
        let bad = || HostlistError::BadRange {
            expr: expr.to_owned(),
            range: range.to_owned(),
        };
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(bad());
        }
        let width = lo.len();
        let (lo_n, hi_n) = match (lo.parse::<u64>(), hi.parse::<u64>()) {
            (Ok(l), Ok(h)) if l <= h => (l, h),
            _ => return Err(bad()),
        };
        if hi_n - lo_n >= MAX_RANGE_HOSTS {
            return Err(HostlistError::TooLarge {
                expr: expr.to_owned(),
                range: range.to_owned(),
            });
        }
        for n in lo_n..=hi_n {
            for tail in &tails {
                out.push(format!("{prefix}{n:0width$}{tail}"));
            }
        }
    }
    Ok(())
}

/// One run of a compressed bracket: `lo` to `hi`, each printed `width` digits wide (zero-padded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Run {
    fn text(&self) -> String {
        let w = self.width;
        if self.lo == self.hi {
            format!("{:0w$}", self.lo)
        } else {
            format!("{:0w$}-{:0w$}", self.lo, self.hi)
        }
    }
}

/// The shortest form this writer knows of `names` (sorted, duplicates dropped): names that end in
/// digits, grouped by what comes before the digits, as brackets of ranges; other names as they
/// are. `expand(&compress(names))` gives the sorted, deduplicated names back for every name that
/// [`slurm_can_take`]; others are written as they are (callers refuse them first).
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    // prefix -> (width class, value) -> digits; width class 0 holds numbers without leading zeros
    // (they print the same at width 1), class w numbers written with leading zeros to w digits.
    let mut numbered: BTreeMap<&str, BTreeMap<(usize, u64), &str>> = BTreeMap::new();
    let mut plain: Vec<&str> = Vec::new();
    for name in names {
        let name = name.as_ref();
        match split_number(name) {
            Some((prefix, digits)) if !prefix.is_empty() => match digits.parse::<u64>() {
                Ok(v) => {
                    let class = if digits.len() > 1 && digits.starts_with('0') {
                        digits.len()
                    } else {
                        0
                    };
                    numbered
                        .entry(prefix)
                        .or_default()
                        .insert((class, v), digits);
                }
                Err(_) => plain.push(name),
            },
            _ => plain.push(name),
        }
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    for (prefix, values) in numbered {
        let mut runs: Vec<Run> = Vec::new();
        for (&(class, v), digits) in &values {
            let width = if class == 0 { 1 } else { class };
            match runs.last_mut() {
                Some(r)
                    if r.width == width
                        && r.hi.checked_add(1) == Some(v)
                        && v - r.lo < MAX_RANGE_HOSTS
                        && format!("{v:0width$}") == *digits =>
                {
                    r.hi = v;
                }
                _ => runs.push(Run {
                    lo: v,
                    hi: v,
                    width,
                }),
            }
        }
        runs.sort_by_key(|r| r.lo);
        let text = if runs.len() == 1 && runs[0].lo == runs[0].hi {
            format!("{prefix}{}", runs[0].text())
        } else {
            let inner: Vec<String> = runs.iter().map(Run::text).collect();
            format!("{prefix}[{}]", inner.join(","))
        };
        entries.push((prefix.to_owned(), text));
    }
    for p in plain {
        entries.push((p.to_owned(), p.to_owned()));
    }
    entries.sort();
    entries.dedup();
    entries
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn expansion_follows_slurm_22_05() {
        // Each row as `scontrol show hostnames` 22.05.8 printed it.
        let table: [(&str, &[&str]); 9] = [
            ("n[9-10]", &["n9", "n10"]),
            ("n[09-10]", &["n09", "n10"]),
            ("n[009-10]", &["n009", "n010"]),
            ("n[8-9,010-011]", &["n8", "n9", "n010", "n011"]),
            ("r[1-2]n[1-2]", &["r1n1", "r1n2", "r2n1", "r2n2"]),
            ("a,b[1-2],c", &["a", "b1", "b2", "c"]),
            ("n[1-3],n2", &["n1", "n2", "n3", "n2"]),
            ("n[3,1]", &["n3", "n1"]),
            ("n[1-2],,n3", &["n1", "n2", "n3"]),
        ];
        for (expr, want) in table {
            assert_eq!(expand(expr).unwrap(), want, "{expr}");
        }
        assert_eq!(expand("n[0-65535]").unwrap().len(), 65_536);
        for bad in [
            "n[1-2]x",
            "n[10-9]",
            "n[1-65537]",
            "n[1-2",
            "n1-2]",
            "n[[1]]",
            "n[a-b]",
            "n[-1]",
            "n[]",
            "n 1",
            "n=1",
            "n#1",
        ] {
            assert!(expand(bad).is_err(), "{bad} expanded");
        }
        assert_eq!(
            expand("n[1-2]x").unwrap_err().to_string(),
            "\"n[1-2]x\": \"x\" after a bracket (Slurm 22.05 takes nothing but another bracket)"
        );
    }

    #[test]
    fn compression_pads_as_slurm_reads_it() {
        let table: [(&[&str], &str); 8] = [
            (&["a1", "a2", "a3"], "a[1-3]"),
            (&["node01", "node02", "node10"], "node[01-02,10]"),
            (&["n9", "n10", "n11"], "n[9-11]"),
            (&["n08", "n09", "n10"], "n[08-09,10]"),
            (&["z00-n0000", "z00-n0001", "z00-n0002"], "z00-n[0000-0002]"),
            (&["b", "a2", "a1", "a1"], "a[1-2],b"),
            (&["n1.example", "n2.example"], "n1.example,n2.example"),
            (&["n1", "n01", "n001"], "n[1,01,001]"),
        ];
        for (names, want) in table {
            assert_eq!(compress(names), want, "{names:?}");
        }
        assert_eq!(compress::<&str>(&[]), "");
        assert_eq!(compress(&["123", "124"]), "123,124", "no bare brackets");
        assert_eq!(compress(&["n5"]), "n5");
    }

    #[test]
    fn names_slurm_cannot_read_back_are_told() {
        assert!(slurm_can_take("z00-n0000") && slurm_can_take("n1.example"));
        assert!(slurm_can_take("n18446744073709551615"));
        assert!(!slurm_can_take("n18446744073709551616"));
        assert!(!slurm_can_take("n99999999999999999999"));
        for bad in ["", "a b", "a,b", "a[1]", "a=b", "a#b"] {
            assert!(!slurm_can_take(bad), "{bad:?}");
        }
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c]{1,2}[0-9]{1,4}",
            "[a-c]{1,2}-[0-9]{1,3}\\.[a-z]{1,3}",
            "[a-c][0-9]",
            "0{0,2}[0-9]{1,3}",
        ]
    }

    proptest! {
        /// Whatever the names, the compressed form expands to exactly the sorted, distinct names.
        #[test]
        fn compress_then_expand_gives_the_names_back(names in proptest::collection::vec(name(), 0..60)) {
            let mut want: Vec<String> = names.clone();
            want.sort();
            want.dedup();
            let text = compress(&names);
            let mut back = expand(&text).unwrap();
            back.sort();
            prop_assert_eq!(&back, &want, "{}", text);
            prop_assert!(back.windows(2).all(|w| w[0] != w[1]), "duplicates in {}", text);
        }
    }
}
