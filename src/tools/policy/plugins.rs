//! Plugin command classifications, derived from each plugin's source (versions below).
//!
//! Method: every command path that conda-cli-mcp 0.2.0, conda-completion 0.3.2, conda-index
//! 0.13.0, conda-pypi 0.13.1, conda-spawn 0.2.0, conda-workspaces 0.12.0 and menuinst 2.5.2
//! add to conda 26.7.1 (terminal and non-terminal, `workspace` and its alias `ws` written
//! out) was taken from the live catalog, and its handler was read from the installed
//! package (`site-packages/<package>/...`, versions checked against the `.dist-info`
//! directories) down to the first write, program start or network fetch. Each entry names
//! the strictest class any option combination reaches; `why` cites the deciding line and
//! names the options that lower it (for later option-level rules). Building a Python
//! project or sdist with its PEP 517 backend (or importing a `gen_patch.py`) counts as
//! running a program: the code comes from a caller-chosen directory, not from a package
//! conda installs, so it is `Exec` even where `--allow-write` already lets link scripts run.
//! Installing wheels or conda packages alone stays `Write`. No dry run is exempted here.
//!
//! A distribution's rules apply only while it is installed at a version of the reviewed
//! `major.minor` series; at any other version its commands get the strict default.

use super::{Access, Reviewed, Rule};

/// Reviewed plugin distributions and their commands.
pub(super) const REVIEWED: &[Reviewed] = &[
    Reviewed {
        distribution: "conda-cli-mcp",
        series: "0.2",
        rules: CONDA_CLI_MCP,
    },
    Reviewed {
        distribution: "conda-completion",
        series: "0.3",
        rules: CONDA_COMPLETION,
    },
    Reviewed {
        distribution: "conda-index",
        series: "0.13",
        rules: CONDA_INDEX,
    },
    Reviewed {
        distribution: "conda-pypi",
        series: "0.13",
        rules: CONDA_PYPI,
    },
    Reviewed {
        distribution: "conda-spawn",
        series: "0.2",
        rules: CONDA_SPAWN,
    },
    Reviewed {
        distribution: "conda-workspaces",
        series: "0.12",
        rules: CONDA_WORKSPACES,
    },
    Reviewed {
        distribution: "menuinst",
        series: "2.5",
        rules: MENUINST,
    },
];

/// conda-cli-mcp 0.2.0.
const CONDA_CLI_MCP: &[Rule] = &[Rule {
    path: &["mcp"],
    access: Access::Exec,
    network: true,
    why: "replaces conda with the conda-cli-mcp stdio server (conda_cli_mcp/plugin.py:57 `os.execv(sys.executable, command)`), which runs conda and, given --allow-exec, raw argv; the caller's argv follows the fixed `--conda-exe` (conda_cli_mcp/plugin.py:31) and a later `--conda-exe PROGRAM` wins (conda_cli_mcp/cli.py:44, plain store), so it can run any program; it never returns until stdin closes",
}];

/// conda-completion 0.3.2.
const CONDA_COMPLETION: &[Rule] = &[
    Rule {
        path: &["completion"],
        access: Access::Read,
        network: false,
        why: "without a subcommand prints help and returns (conda_completion/cli/main.py:159 `build_parser().print_help()`); --cache-dir only sets an in-process override (conda_completion/paths.py:19)",
    },
    Rule {
        path: &["completion", "generate"],
        access: Access::Write,
        network: true,
        why: "writes the completion manifest and package-version store under the user cache dir (conda_completion/cli/generate.py:60 `write_manifest(manifest, path)`, :93 `write_versions(version_map, index_path, store_path)`); fetches repodata of every channel/subdir (:92 `extract_package_data()`) unless --no-repodata",
    },
    Rule {
        path: &["completion", "init"],
        access: Access::Read,
        network: false,
        why: "prints the completion script after reading the manifest (conda_completion/cli/init.py:42 `sys.stdout.write(script)`)",
    },
    Rule {
        path: &["completion", "install"],
        access: Access::Write,
        network: true,
        why: "generates the manifest (fetching repodata unless --no-repodata) and rewrites a shell startup file with an eval hook (conda_completion/cli/install.py:76 `atomic_write(rc_path, content.encode(\"utf-8\"))`); --dry-run returns at :55 `if args.dry_run:` before any write, but without SHELL it still runs `ps` to detect the shell (conda_completion/shell/__init__.py:129)",
    },
    Rule {
        path: &["completion", "refresh"],
        access: Access::Write,
        network: true,
        why: "always refetches repodata and rewrites the manifest and version store in the user cache dir (conda_completion/cli/refresh.py:15 `return write_completion_data(args, refresh=True, include=True)`)",
    },
    Rule {
        path: &["completion", "status"],
        access: Access::Read,
        network: false,
        why: "prints paths, sizes and the plugin hash (conda_completion/cli/status.py:25 `print(f\"Cache directory: {cache_dir}\")`); reads only",
    },
    Rule {
        path: &["completion", "uninstall"],
        access: Access::Write,
        network: false,
        why: "removes the hook from the shell startup file (conda_completion/cli/uninstall.py:55 `atomic_write(rc_path, new_content.encode(\"utf-8\"))`, or :52 `rc_path.unlink()`); --dry-run returns at :41 before writing",
    },
];

/// conda-index 0.13.0.
const CONDA_INDEX: &[Rule] = &[Rule {
    path: &["index"],
    access: Access::Exec,
    network: true,
    why: "runs Python code from disk: `--patch-generator FILE.py`, or DIR/gen_patch.py whenever it exists (conda_index/index/__init__.py:1339 `gen_patch_path = patch_generator or join(self.channel_root, \"gen_patch.py\")`, :1349 `spec.loader.exec_module(mod)`); otherwise writes repodata, index.html and a .cache database under DIR or --output; --db postgresql --db-url connects to a database server",
}];

/// conda-pypi 0.13.1.
const CONDA_PYPI: &[Rule] = &[
    Rule {
        path: &["pypi"],
        access: Access::Read,
        network: false,
        why: "requires a subcommand (conda_pypi/cli/main.py:70 `required=True`): argparse exits before any action",
    },
    Rule {
        path: &["pypi", "convert"],
        access: Access::Exec,
        network: true,
        why: "builds a project directory or sdist with its PEP 517 backend, i.e. runs the project's build code (conda_pypi/cli/convert.py:178 `package_path = build.pypa_to_conda(` -> conda_pypi/build.py:142 `editable_file = builder.build(distribution, output_path)`), after `conda install --yes` of missing build requirements into the target env (conda_pypi/dependencies/pypi.py:67); a .whl input (conda_pypi/cli/convert.py:159) only writes a .conda into --output-folder",
    },
    Rule {
        path: &["pypi", "index"],
        access: Access::Exec,
        network: false,
        why: "writes repodata and a .cache database into DIRECTORY (conda_pypi/cli/index.py:165 `update_index(channel_index)`) through conda-index, which runs DIRECTORY/gen_patch.py if present (conda_pypi/index.py:33 `channel_index.index(patch_generator=None)` -> conda_index/index/__init__.py:1349 `spec.loader.exec_module(mod)`)",
    },
    Rule {
        path: &["pypi", "install"],
        access: Access::Exec,
        network: true,
        why: "`-e/--editable PATH` builds the project with its PEP 517 backend (conda_pypi/cli/install.py:166 `package = build.pypa_to_conda(` -> conda_pypi/build.py:142 `builder.build(distribution, output_path)`); without -e it downloads wheels only (conda_pypi/downloader.py:38 `only_binary=\":all:\"`), converts them into a channel under the user data dir (conda_pypi/convert_tree.py:70, :196) and runs `conda install` (conda_pypi/cli/install.py:238); --dry-run returns before building only with -e (conda_pypi/cli/install.py:148)",
    },
];

/// conda-spawn 0.2.0.
const CONDA_SPAWN: &[Rule] = &[Rule {
    path: &["spawn"],
    access: Access::Exec,
    network: true,
    why: "starts the user's shell on a pty and, given COMMAND, types it into that shell (conda_spawn/shell.py:263 `child = pexpect.spawn(`, :299 `child.sendline(shlex.join(command))`); only --hook stops at printing the activation script (conda_spawn/cli.py:119 `return hook(prefix, shell, stack=args.stack)`; with --shell cmd conda's activator also leaves a temp .env file); alias `shell`",
}];

/// conda-workspaces 0.12.0.
const CONDA_WORKSPACES: &[Rule] = &[
    Rule {
        path: &["task"],
        access: Access::Read,
        network: false,
        why: "without a subcommand prints help (conda_workspaces/cli/main.py:1381 `generate_task_parser().print_help()`)",
    },
    Rule {
        path: &["task", "add"],
        access: Access::Write,
        network: false,
        why: "adds a shell-line task to the manifest (conda_workspaces/cli/task/add.py:64 `parser.add_task(file_path, args.task_name, task)`) that `task run` later executes; --dry-run returns at :56",
    },
    Rule {
        path: &["task", "export"],
        access: Access::Write,
        network: false,
        why: "prints TOML (conda_workspaces/cli/task/export.py:55 `print(text, end=\"\")`) unless -o/--output: :43 `atomic_write_text(`; --dry-run is honoured only when the output file already exists (:39 `confirm_yn`)",
    },
    Rule {
        path: &["task", "list"],
        access: Access::Read,
        network: false,
        why: "parses the manifest and the user tasks.toml and prints them (conda_workspaces/cli/task/list.py:21 `detect_and_parse_tasks(`)",
    },
    Rule {
        path: &["task", "remove"],
        access: Access::Write,
        network: false,
        why: "removes a task from the manifest (conda_workspaces/cli/task/remove.py:38 `parser.remove_task(task_file, args.task_name)`); --dry-run returns at :30",
    },
    Rule {
        path: &["task", "run"],
        access: Access::Exec,
        network: true,
        why: "runs the manifest's task shell lines, or the caller's words as an ad-hoc shell line when no task has that name (conda_workspaces/cli/task/run.py:377 `exit_code = shell.run(`, :533); writes the task cache (:400 `save_cache(`); --dry-run returns at :222/:523 before running",
    },
    Rule {
        path: &["workspace"],
        access: Access::Read,
        network: false,
        why: "without a subcommand prints help (conda_workspaces/cli/main.py:1126 `generate_workspace_parser().print_help()`)",
    },
    Rule {
        path: &["workspace", "activate"],
        access: Access::Read,
        network: false,
        why: "prints activation instructions for an installed workspace env (conda_workspaces/cli/workspace/activate.py:29 `print_activate(str(prefix))`)",
    },
    Rule {
        path: &["workspace", "add"],
        access: Access::Exec,
        network: true,
        why: "edits the manifest, re-solves and writes conda.lock, then installs the affected envs (conda_workspaces/cli/workspace/add.py:216 `sync_environments(`), building local-path PyPI dependencies with their PEP 517 backend (conda_workspaces/lockfile.py:3171 `_install_path_deps(self.prefix, self.resolved)` -> conda_workspaces/envs.py:480 `package = pypa_to_conda(` -> conda_pypi/build.py:142); --no-install and --no-lockfile-update (:209) stop before installing",
    },
    Rule {
        path: &["workspace", "archive"],
        access: Access::Exec,
        network: true,
        why: "writes the archive and receipt, and conda.lock with --lock (conda_workspaces/cli/workspace/archive.py:77 `WorkspaceArchive.create(`); --bundle downloads packages; picks files by running `git ls-files -z` in the workspace root (conda_workspaces/archive.py:2317), and git runs the repository's core.fsmonitor command, so a planted .git/config runs any program, --dry-run included",
    },
    Rule {
        path: &["workspace", "clean"],
        access: Access::Write,
        network: false,
        why: "deletes installed workspace env prefixes (conda_workspaces/cli/workspace/clean.py:66 `remove_environment(`); --dry-run skips both removal paths (:64, :94 `if not dry_run:`)",
    },
    Rule {
        path: &["workspace", "envs"],
        access: Access::Read,
        network: false,
        why: "lists the manifest's envs and the installed prefixes (conda_workspaces/cli/main.py:1198 `args.envs = True` -> conda_workspaces/cli/workspace/list.py:121 `list_installed_environments(ctx)`)",
    },
    Rule {
        path: &["workspace", "export"],
        access: Access::Write,
        network: false,
        why: "prints the export (conda_workspaces/cli/workspace/export.py:124 `if dry_run or output_path is None:`) unless the subcommand's own -f/--file (not `workspace -f`): :157 `atomic_write_text(`; --dry-run prints instead of writing; --from-prefix prints conda's configured channels unmasked (conda_workspaces/export.py:188), as `conda export` does",
    },
    Rule {
        path: &["workspace", "image"],
        access: Access::Exec,
        network: true,
        why: "builds a container image with Docker Buildx (conda_workspaces/image.py:408 `[\"docker\", \"buildx\", *args]`) from a caller-chosen --base-image, running the locked install inside it, and --push uses the user's registry credentials; --dry-run (conda_workspaces/cli/workspace/image.py:49 `image.preview()`) still runs git in the workspace root (see archive)",
    },
    Rule {
        path: &["workspace", "import"],
        access: Access::Exec,
        network: true,
        why: "writes the converted manifest and conda.lock and installs the env (conda_workspaces/cli/workspace/import_manifest.py:272 `sync_environments(`), building local-path PyPI dependencies (conda_workspaces/lockfile.py:3171 `_install_path_deps(` -> conda_pypi/build.py:142); --no-install (:71) stops before installing",
    },
    Rule {
        path: &["workspace", "info"],
        access: Access::Read,
        network: false,
        why: "reads the manifest, lockfile status and installed records (conda_workspaces/cli/workspace/info.py:93 `lock = lockfile_status(ctx, config)`); channels are printed redacted (:86)",
    },
    Rule {
        path: &["workspace", "init"],
        access: Access::Write,
        network: false,
        why: "writes a new manifest or appends [tool.conda] to pyproject.toml (conda_workspaces/cli/workspace/init.py:54 `parser.write_workspace_stub(base_dir, name, channels, platforms)`)",
    },
    Rule {
        path: &["workspace", "install"],
        access: Access::Exec,
        network: true,
        why: "solves, writes conda.lock and installs the envs (conda_workspaces/cli/workspace/install.py:128 `sync_environments(`, :228 `plan.execute()`), building local-path PyPI dependencies with their PEP 517 backend (conda_workspaces/lockfile.py:3171 `_install_path_deps(self.prefix, self.resolved)` -> conda_workspaces/envs.py:480 `pypa_to_conda(` -> conda_pypi/build.py:142) and copying the manifest's activation scripts into the prefix (conda_workspaces/envs.py:696)",
    },
    Rule {
        path: &["workspace", "list"],
        access: Access::Read,
        network: false,
        why: "lists an installed env's package records (conda_workspaces/cli/workspace/list.py:94 `packages = list_installed_packages(ctx, env_name)`)",
    },
    Rule {
        path: &["workspace", "lock"],
        access: Access::Write,
        network: true,
        why: "solves every env/platform and writes conda.lock, or --output, or a --merge result (conda_workspaces/cli/workspace/lock.py:175 `generate_lockfile(` -> conda_workspaces/lockfile.py:2336 `return write_lockfile(`)",
    },
    Rule {
        path: &["workspace", "platform"],
        access: Access::Read,
        network: false,
        why: "requires add or remove (conda_workspaces/cli/main.py:693 `dest=\"platform_action\", required=True`): argparse exits before any action",
    },
    Rule {
        path: &["workspace", "platform", "add"],
        access: Access::Write,
        network: true,
        why: "edits the manifest platforms and re-solves conda.lock without touching installed prefixes (conda_workspaces/cli/workspace/platform.py:238 `rendered = render_lockfile(`, :247 `publication.publish_lockfile(rendered)`)",
    },
    Rule {
        path: &["workspace", "platform", "remove"],
        access: Access::Write,
        network: true,
        why: "edits the manifest platforms and re-solves conda.lock without touching installed prefixes (conda_workspaces/cli/workspace/platform.py:238 `rendered = render_lockfile(`, :247 `publication.publish_lockfile(rendered)`)",
    },
    Rule {
        path: &["workspace", "quickstart"],
        access: Access::Exec,
        network: true,
        why: "init + add + install (conda_workspaces/cli/workspace/quickstart.py:227 `execute_install(`, building PyPI path dependencies) then starts an interactive shell (:241 `execute_shell(`) unless --no-shell or --json",
    },
    Rule {
        path: &["workspace", "remove"],
        access: Access::Exec,
        network: true,
        why: "edits the manifest, re-solves and reinstalls the affected envs with pruning (conda_workspaces/cli/workspace/remove.py:373 `sync_environments(`), rebuilding local-path PyPI dependencies (conda_workspaces/lockfile.py:3171 `_install_path_deps(` -> conda_pypi/build.py:142); --all deletes the env (conda_workspaces/cli/workspace/remove.py:261 `remove_environment(`); --no-install stops before installing",
    },
    Rule {
        path: &["workspace", "run"],
        access: Access::Exec,
        network: true,
        why: "runs the caller's command in a workspace env through `conda run` (conda_workspaces/cli/workspace/run.py:63 `return conda_run(run_args, parser)`)",
    },
    Rule {
        path: &["workspace", "sbom"],
        access: Access::Write,
        network: false,
        why: "prints a CycloneDX SBOM through the export path (conda_workspaces/cli/workspace/sbom.py:100 `execute_export(`) and writes it only with -f/--file (:113 `if args.output is not None and not args.dry_run:`; conda_workspaces/cli/workspace/export.py:157 `atomic_write_text(`)",
    },
    Rule {
        path: &["workspace", "shell"],
        access: Access::Exec,
        network: true,
        why: "starts an interactive shell in a workspace env through conda-spawn (conda_workspaces/cli/workspace/shell.py:43 `return spawn(prefix=prefix, command=command)`)",
    },
    Rule {
        path: &["workspace", "unarchive"],
        access: Access::Exec,
        network: true,
        why: "extracts an archive into --target (conda_workspaces/cli/workspace/archive.py:175 `result = archive.extract(`); with --install it installs the extracted workspace (:163 `archive.install(` -> :121 `return execute_install(`), building the archive's local-path PyPI dependencies (see install)",
    },
    Rule {
        path: &["workspace", "update"],
        access: Access::Write,
        network: true,
        why: "re-solves selected dependencies, rewrites manifest and conda.lock and updates installed prefixes (conda_workspaces/cli/workspace/update.py:291 `sync_environments(`) through selective plans that skip the PyPI path build (conda_workspaces/lockfile.py:3009 `update_path_dependencies=update_names is None`); package link scripts run as in `conda update`",
    },
    Rule {
        path: &["ws"],
        access: Access::Read,
        network: false,
        why: "without a subcommand prints help (conda_workspaces/cli/main.py:1126 `generate_workspace_parser().print_help()`)",
    },
    Rule {
        path: &["ws", "activate"],
        access: Access::Read,
        network: false,
        why: "prints activation instructions for an installed workspace env (conda_workspaces/cli/workspace/activate.py:29 `print_activate(str(prefix))`)",
    },
    Rule {
        path: &["ws", "add"],
        access: Access::Exec,
        network: true,
        why: "edits the manifest, re-solves and writes conda.lock, then installs the affected envs (conda_workspaces/cli/workspace/add.py:216 `sync_environments(`), building local-path PyPI dependencies with their PEP 517 backend (conda_workspaces/lockfile.py:3171 `_install_path_deps(self.prefix, self.resolved)` -> conda_workspaces/envs.py:480 `package = pypa_to_conda(` -> conda_pypi/build.py:142); --no-install and --no-lockfile-update (:209) stop before installing",
    },
    Rule {
        path: &["ws", "archive"],
        access: Access::Exec,
        network: true,
        why: "writes the archive and receipt, and conda.lock with --lock (conda_workspaces/cli/workspace/archive.py:77 `WorkspaceArchive.create(`); --bundle downloads packages; picks files by running `git ls-files -z` in the workspace root (conda_workspaces/archive.py:2317), and git runs the repository's core.fsmonitor command, so a planted .git/config runs any program, --dry-run included",
    },
    Rule {
        path: &["ws", "clean"],
        access: Access::Write,
        network: false,
        why: "deletes installed workspace env prefixes (conda_workspaces/cli/workspace/clean.py:66 `remove_environment(`); --dry-run skips both removal paths (:64, :94 `if not dry_run:`)",
    },
    Rule {
        path: &["ws", "envs"],
        access: Access::Read,
        network: false,
        why: "lists the manifest's envs and the installed prefixes (conda_workspaces/cli/main.py:1198 `args.envs = True` -> conda_workspaces/cli/workspace/list.py:121 `list_installed_environments(ctx)`)",
    },
    Rule {
        path: &["ws", "export"],
        access: Access::Write,
        network: false,
        why: "prints the export (conda_workspaces/cli/workspace/export.py:124 `if dry_run or output_path is None:`) unless the subcommand's own -f/--file (not `workspace -f`): :157 `atomic_write_text(`; --dry-run prints instead of writing; --from-prefix prints conda's configured channels unmasked (conda_workspaces/export.py:188), as `conda export` does",
    },
    Rule {
        path: &["ws", "image"],
        access: Access::Exec,
        network: true,
        why: "builds a container image with Docker Buildx (conda_workspaces/image.py:408 `[\"docker\", \"buildx\", *args]`) from a caller-chosen --base-image, running the locked install inside it, and --push uses the user's registry credentials; --dry-run (conda_workspaces/cli/workspace/image.py:49 `image.preview()`) still runs git in the workspace root (see archive)",
    },
    Rule {
        path: &["ws", "import"],
        access: Access::Exec,
        network: true,
        why: "writes the converted manifest and conda.lock and installs the env (conda_workspaces/cli/workspace/import_manifest.py:272 `sync_environments(`), building local-path PyPI dependencies (conda_workspaces/lockfile.py:3171 `_install_path_deps(` -> conda_pypi/build.py:142); --no-install (:71) stops before installing",
    },
    Rule {
        path: &["ws", "info"],
        access: Access::Read,
        network: false,
        why: "reads the manifest, lockfile status and installed records (conda_workspaces/cli/workspace/info.py:93 `lock = lockfile_status(ctx, config)`); channels are printed redacted (:86)",
    },
    Rule {
        path: &["ws", "init"],
        access: Access::Write,
        network: false,
        why: "writes a new manifest or appends [tool.conda] to pyproject.toml (conda_workspaces/cli/workspace/init.py:54 `parser.write_workspace_stub(base_dir, name, channels, platforms)`)",
    },
    Rule {
        path: &["ws", "install"],
        access: Access::Exec,
        network: true,
        why: "solves, writes conda.lock and installs the envs (conda_workspaces/cli/workspace/install.py:128 `sync_environments(`, :228 `plan.execute()`), building local-path PyPI dependencies with their PEP 517 backend (conda_workspaces/lockfile.py:3171 `_install_path_deps(self.prefix, self.resolved)` -> conda_workspaces/envs.py:480 `pypa_to_conda(` -> conda_pypi/build.py:142) and copying the manifest's activation scripts into the prefix (conda_workspaces/envs.py:696)",
    },
    Rule {
        path: &["ws", "list"],
        access: Access::Read,
        network: false,
        why: "lists an installed env's package records (conda_workspaces/cli/workspace/list.py:94 `packages = list_installed_packages(ctx, env_name)`)",
    },
    Rule {
        path: &["ws", "lock"],
        access: Access::Write,
        network: true,
        why: "solves every env/platform and writes conda.lock, or --output, or a --merge result (conda_workspaces/cli/workspace/lock.py:175 `generate_lockfile(` -> conda_workspaces/lockfile.py:2336 `return write_lockfile(`)",
    },
    Rule {
        path: &["ws", "platform"],
        access: Access::Read,
        network: false,
        why: "requires add or remove (conda_workspaces/cli/main.py:693 `dest=\"platform_action\", required=True`): argparse exits before any action",
    },
    Rule {
        path: &["ws", "platform", "add"],
        access: Access::Write,
        network: true,
        why: "edits the manifest platforms and re-solves conda.lock without touching installed prefixes (conda_workspaces/cli/workspace/platform.py:238 `rendered = render_lockfile(`, :247 `publication.publish_lockfile(rendered)`)",
    },
    Rule {
        path: &["ws", "platform", "remove"],
        access: Access::Write,
        network: true,
        why: "edits the manifest platforms and re-solves conda.lock without touching installed prefixes (conda_workspaces/cli/workspace/platform.py:238 `rendered = render_lockfile(`, :247 `publication.publish_lockfile(rendered)`)",
    },
    Rule {
        path: &["ws", "quickstart"],
        access: Access::Exec,
        network: true,
        why: "init + add + install (conda_workspaces/cli/workspace/quickstart.py:227 `execute_install(`, building PyPI path dependencies) then starts an interactive shell (:241 `execute_shell(`) unless --no-shell or --json",
    },
    Rule {
        path: &["ws", "remove"],
        access: Access::Exec,
        network: true,
        why: "edits the manifest, re-solves and reinstalls the affected envs with pruning (conda_workspaces/cli/workspace/remove.py:373 `sync_environments(`), rebuilding local-path PyPI dependencies (conda_workspaces/lockfile.py:3171 `_install_path_deps(` -> conda_pypi/build.py:142); --all deletes the env (conda_workspaces/cli/workspace/remove.py:261 `remove_environment(`); --no-install stops before installing",
    },
    Rule {
        path: &["ws", "run"],
        access: Access::Exec,
        network: true,
        why: "runs the caller's command in a workspace env through `conda run` (conda_workspaces/cli/workspace/run.py:63 `return conda_run(run_args, parser)`)",
    },
    Rule {
        path: &["ws", "sbom"],
        access: Access::Write,
        network: false,
        why: "prints a CycloneDX SBOM through the export path (conda_workspaces/cli/workspace/sbom.py:100 `execute_export(`) and writes it only with -f/--file (:113 `if args.output is not None and not args.dry_run:`; conda_workspaces/cli/workspace/export.py:157 `atomic_write_text(`)",
    },
    Rule {
        path: &["ws", "shell"],
        access: Access::Exec,
        network: true,
        why: "starts an interactive shell in a workspace env through conda-spawn (conda_workspaces/cli/workspace/shell.py:43 `return spawn(prefix=prefix, command=command)`)",
    },
    Rule {
        path: &["ws", "unarchive"],
        access: Access::Exec,
        network: true,
        why: "extracts an archive into --target (conda_workspaces/cli/workspace/archive.py:175 `result = archive.extract(`); with --install it installs the extracted workspace (:163 `archive.install(` -> :121 `return execute_install(`), building the archive's local-path PyPI dependencies (see install)",
    },
    Rule {
        path: &["ws", "update"],
        access: Access::Write,
        network: true,
        why: "re-solves selected dependencies, rewrites manifest and conda.lock and updates installed prefixes (conda_workspaces/cli/workspace/update.py:291 `sync_environments(`) through selective plans that skip the PyPI path build (conda_workspaces/lockfile.py:3009 `update_path_dependencies=update_names is None`); package link scripts run as in `conda update`",
    },
];

/// menuinst 2.5.2.
const MENUINST: &[Rule] = &[Rule {
    path: &["menuinst"],
    access: Access::Exec,
    network: false,
    why: "--install runs each Menu/*.json `precreate` snippet of the caller-chosen -p/--prefix with bash (menuinst/platforms/base.py:221 `precreate_code = self.render_key(\"precreate\")`, :231 `logged_run(cmd, check=True)`) and writes shortcuts, .desktop and MIME files; when the prefix is not writable it re-runs itself under `sudo` (menuinst/utils.py:473 `subprocess.call([\"sudo\", *argv])`); --remove deletes them",
}];
