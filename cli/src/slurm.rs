//! `zonemesh publish --slurm tree|block|yaml`: the aggregator's tiers as Slurm's topology file,
//! built and checked by `zonemesh_publish::slurm`, written here: atomically (a temporary file in
//! the same directory, synced, renamed over the old one) and only when its content changed, then
//! `--on-change` (for example `scontrol reconfigure`) with its exit status logged.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use zonemesh_publish::slurm::{self, Form, SlurmOptions, YamlDefault, hostlist};

use crate::failure::{Failure, exit};

/// Environment variables of the `--slurm` flags, one constant per name (deploy/systemd's
/// `zonemesh-slurm-topology.env` sets them).
pub mod env {
    /// `--slurm`.
    pub const SLURM: &str = "ZONEMESH_SLURM";
    /// `--file`; also handed to the `--on-change` command.
    pub const SLURM_FILE: &str = "ZONEMESH_SLURM_FILE";
    /// `--slurm-nodes`.
    pub const SLURM_NODES: &str = "ZONEMESH_SLURM_NODES";
    /// `--exclude-faulty`.
    pub const SLURM_EXCLUDE_FAULTY: &str = "ZONEMESH_SLURM_EXCLUDE_FAULTY";
    /// `--slurm-block-base`.
    pub const SLURM_BLOCK_BASE: &str = "ZONEMESH_SLURM_BLOCK_BASE";
    /// `--slurm-yaml-default`.
    pub const SLURM_YAML_DEFAULT: &str = "ZONEMESH_SLURM_YAML_DEFAULT";
    /// `--on-change`.
    pub const SLURM_ON_CHANGE: &str = "ZONEMESH_SLURM_ON_CHANGE";
}

/// `--slurm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SlurmForm {
    /// topology.conf for TopologyPlugin=topology/tree: a leaf switch per zone, a switch per zone
    /// group, one root.
    Tree,
    /// topology.conf for TopologyPlugin=topology/block (Slurm 23.11 and later): a block per zone.
    Block,
    /// topology.yaml (Slurm 25.05 and later): both, as topologies zonemesh-tree and zonemesh-block.
    Yaml,
}

/// `--slurm-yaml-default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DefaultArg {
    /// zonemesh-tree is the cluster default.
    Tree,
    /// zonemesh-block is the cluster default.
    Block,
    /// Neither: partitions pick one with Topology=.
    None,
}

/// The flags of `zonemesh publish --slurm`.
#[derive(Debug, Clone, Args)]
pub struct SlurmArgs {
    /// Write the tiers as Slurm's network topology: tree, block or yaml (instead of printing
    /// Kubernetes objects).
    #[arg(long, env = env::SLURM, value_enum, conflicts_with = "delete")]
    pub slurm: Option<SlurmForm>,
    /// The file to write (topology.conf, or topology.yaml for --slurm yaml, beside slurm.conf);
    /// written atomically, and only when its content changes. Without it the text goes to
    /// standard output.
    #[arg(long, env = env::SLURM_FILE, requires = "slurm")]
    pub file: Option<PathBuf>,
    /// The nodes Slurm knows: a file of hostlists (one or more a line, `#` comments; for example
    /// `sinfo -h -N -o %N`), or a hostlist itself (`node[01-64],login1`). Nodes zonemesh does
    /// not measure go into a leaf of their own under the root; measured nodes not in it are
    /// left out.
    #[arg(long, env = env::SLURM_NODES, requires = "slurm", value_name = "FILE|HOSTLIST")]
    pub slurm_nodes: Option<String>,
    /// Move the nodes zonemesh finds unreachable (DOWN) out of their zone: into a leaf of their
    /// own under the root (tree), out of every block (block).
    #[arg(long, env = env::SLURM_EXCLUDE_FAULTY, requires = "slurm")]
    pub exclude_faulty: bool,
    /// The base block size of --slurm block (default: the smallest zone's node count). Zones
    /// with fewer nodes are in no block, and named.
    #[arg(long, env = env::SLURM_BLOCK_BASE, requires = "slurm")]
    pub slurm_block_base: Option<usize>,
    /// The cluster default of --slurm yaml.
    #[arg(long, env = env::SLURM_YAML_DEFAULT, requires = "slurm", value_enum, default_value = "tree")]
    pub slurm_yaml_default: DefaultArg,
    /// A command to run (by /bin/sh) after the file changed, for example `scontrol
    /// reconfigure`; its exit status is logged, and a failure is an error (the file stays
    /// written). It gets the file's path in ZONEMESH_SLURM_FILE.
    #[arg(long, env = env::SLURM_ON_CHANGE, requires = "file")]
    pub on_change: Option<String>,
}

/// What `--slurm` is to do, checked before the aggregator is asked.
#[derive(Debug, Clone)]
pub struct Plan {
    form: Form,
    file: Option<PathBuf>,
    options: SlurmOptions,
    on_change: Option<String>,
    dry_run: bool,
}

impl Plan {
    /// Whether the unreachable nodes are needed (ListNodes).
    pub fn needs_node_states(&self) -> bool {
        self.options.exclude_faulty
    }
}

fn usage(message: String) -> Failure {
    Failure::new(exit::USAGE, message)
}

/// The names of a `--slurm-nodes` value: a file of hostlists, or a hostlist.
pub fn slurm_nodes(value: &str) -> Result<BTreeSet<String>, Failure> {
    let path = Path::new(value);
    let (text, from_file) = if path.is_file() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("--slurm-nodes {value}: {e}")))?;
        (text, true)
    } else if value.contains('/') {
        return Err(usage(format!(
            "--slurm-nodes {value}: no such file (a hostlist has no '/')"
        )));
    } else {
        (value.to_owned(), false)
    };
    let mut names = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for token in line.split_whitespace() {
            let expanded = hostlist::expand(token).map_err(|e| {
                usage(if from_file {
                    format!("--slurm-nodes {value}, line {}: {e}", i + 1)
                } else {
                    format!("--slurm-nodes: {e}")
                })
            })?;
            names.extend(expanded);
        }
    }
    if names.is_empty() {
        return Err(usage(format!("--slurm-nodes {value}: names no node")));
    }
    Ok(names)
}

/// Checks the flags (the file's directory, the node list) into a plan.
pub fn plan(args: &SlurmArgs, dry_run: bool) -> Result<Option<Plan>, Failure> {
    let Some(form) = args.slurm else {
        return Ok(None);
    };
    if let Some(file) = &args.file {
        if file.as_os_str().is_empty() || file.file_name().is_none() {
            return Err(usage(format!("--file {}: not a file name", file.display())));
        }
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(usage(format!(
                "--file {}: the directory {} does not exist",
                file.display(),
                dir.display()
            )));
        }
        if file.is_dir() {
            return Err(usage(format!(
                "--file {}: is a directory (name the file, such as {}/topology.conf)",
                file.display(),
                file.display()
            )));
        }
    }
    if args
        .on_change
        .as_deref()
        .is_some_and(|c| c.trim().is_empty())
    {
        return Err(usage("--on-change: an empty command".into()));
    }
    let slurm_nodes = args.slurm_nodes.as_deref().map(slurm_nodes).transpose()?;
    Ok(Some(Plan {
        form: match form {
            SlurmForm::Tree => Form::Tree,
            SlurmForm::Block => Form::Block,
            SlurmForm::Yaml => Form::Yaml,
        },
        file: args.file.clone(),
        options: SlurmOptions {
            slurm_nodes,
            faulty: BTreeSet::new(),
            exclude_faulty: args.exclude_faulty,
            block_base: args.slurm_block_base,
            yaml_default: match args.slurm_yaml_default {
                DefaultArg::Tree => YamlDefault::Tree,
                DefaultArg::Block => YamlDefault::Block,
                DefaultArg::None => YamlDefault::None,
            },
        },
        on_change: args.on_change.clone(),
        dry_run,
    }))
}

/// Writes `text` to `path` unless it already holds it: into a temporary file beside it, synced,
/// renamed over it, and the directory synced. True when it wrote.
pub fn write_if_changed(path: &Path, text: &str) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.zonemesh-{}", std::process::id()));
    let result = (|| {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        // Readable by slurmctld and slurmd, whatever user they run as (as slurm.conf is).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|()| true)
}

/// Runs `command` by /bin/sh; its exit status (or why it could not run).
fn run_on_change(command: &str, file: &Path) -> Result<std::process::ExitStatus, std::io::Error> {
    std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .env(env::SLURM_FILE, file)
        .stdin(std::process::Stdio::null())
        .status()
}

/// Builds the file from the aggregator's tiers and the unreachable nodes, then prints or writes
/// it (and runs `--on-change` after a change).
pub fn publish(
    plan: &Plan,
    tiers: &zonemesh_domain::Tiers,
    unreachable: BTreeSet<String>,
) -> Result<(), Failure> {
    let mut options = plan.options.clone();
    options.faulty = unreachable;
    let file = slurm::file(tiers, plan.form, &options).map_err(|e| {
        let status = match e {
            slurm::SlurmError::ZeroBase => exit::USAGE,
            _ => exit::FAILURE,
        };
        Failure::new(
            status,
            format!("publish --slurm {}: {e}", plan.form.as_str()),
        )
    })?;
    for n in &file.notes {
        eprintln!("zonemesh: {n}");
    }
    let Some(path) = &plan.file else {
        print!("{}", file.text);
        return Ok(());
    };
    if plan.dry_run {
        let same = std::fs::read(path).is_ok_and(|old| old == file.text.as_bytes());
        eprintln!(
            "zonemesh: --dry-run: {} {}",
            path.display(),
            if same {
                "holds this already"
            } else {
                "would be written with this"
            }
        );
        print!("{}", file.text);
        return Ok(());
    }
    let written = write_if_changed(path, &file.text).map_err(|e| {
        Failure::new(
            exit::FAILURE,
            format!("--file {}: cannot write it: {e}", path.display()),
        )
    })?;
    if !written {
        println!("  {} unchanged", path.display());
        return Ok(());
    }
    println!("  wrote {}", path.display());
    let Some(command) = &plan.on_change else {
        return Ok(());
    };
    match run_on_change(command, path) {
        Ok(status) if status.success() => {
            eprintln!("zonemesh: --on-change `{command}` exited with status 0");
            Ok(())
        }
        Ok(status) => {
            let how = status.code().map_or_else(
                || format!("was killed ({status})"),
                |c| format!("exited with status {c}"),
            );
            eprintln!("zonemesh: --on-change `{command}` {how}");
            Err(Failure::new(
                exit::FAILURE,
                format!(
                    "--on-change `{command}` {how}; {} stays written (the command runs again at the next change: run it by hand now)",
                    path.display()
                ),
            ))
        }
        Err(e) => Err(Failure::new(
            exit::FAILURE,
            format!(
                "--on-change `{command}`: could not run /bin/sh: {e}; {} stays written",
                path.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_once_and_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topology.conf");
        assert!(write_if_changed(&path, "SwitchName=a Nodes=a1\n").unwrap());
        assert!(!write_if_changed(&path, "SwitchName=a Nodes=a1\n").unwrap());
        assert!(write_if_changed(&path, "SwitchName=a Nodes=a[1-2]\n").unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "SwitchName=a Nodes=a[1-2]\n"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["topology.conf"], "no temporary file left");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
        let missing = dir.path().join("nope").join("topology.conf");
        assert!(write_if_changed(&missing, "x").is_err());
    }

    #[test]
    fn slurm_nodes_come_from_a_hostlist_or_a_file() {
        assert_eq!(
            slurm_nodes("node[01-03],login").unwrap(),
            ["login", "node01", "node02", "node03"]
                .map(String::from)
                .into_iter()
                .collect()
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("nodes");
        std::fs::write(&f, "# sinfo -h -N -o %N\na[1-2]\nb1 b2\n\n").unwrap();
        assert_eq!(slurm_nodes(f.to_str().unwrap()).unwrap().len(), 4);
        std::fs::write(&f, "a[1-2\n").unwrap();
        let e = slurm_nodes(f.to_str().unwrap()).unwrap_err();
        assert!(
            e.message.contains("line 1") && e.message.contains("unbalanced"),
            "{}",
            e.message
        );
        assert!(
            slurm_nodes("/no/such/file")
                .unwrap_err()
                .message
                .contains("no such file")
        );
        assert!(
            slurm_nodes("n[1-2]x")
                .unwrap_err()
                .message
                .starts_with("--slurm-nodes: ")
        );
    }
}
