//! The last steps of a call that passed its gates: the run's gates (sandbox, size,
//! confirmation), the queue, the run (watched when the request asked for progress) and
//! the result.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;

use super::super::caller::Caller;
use super::super::judged::Judged;
use super::super::ready::Ready;
use super::super::refuse::Refusal;
use super::super::result::execution_result;
use super::super::state::Server;
use super::super::{confirm, progress};
use super::bound;
use super::gates::{self, AGAIN, AGAIN_ASKED, RUN};
use crate::host::exec;

impl Server {
    /// Run a judged call that passed its gates: the run's gates, then queue → run →
    /// result.
    pub(super) async fn execute(
        &self,
        ready: &Ready,
        mut call: Judged,
        caller: &Caller,
    ) -> Result<CallToolResult, Refusal> {
        let (ct, progress) = (&caller.ct, caller.progress.as_ref());
        // Asked before the slot is taken: waiting for the person holds no slot.
        let confirm = self.pass_all(RUN, ready, &mut call, caller);
        progress::waiting_for(progress, ct, "Waiting for the user to confirm", confirm).await?;
        let spec = call.spec(&self.shared.config, self.shared.host.exec.limits());
        // A confirmed plan runs bound to what was shown (`host::bind`).
        let mut run = match call.binding() {
            Some(binding) => {
                let run = binding.run_spec(&spec);
                gates::check_size(&run)?;
                run
            }
            None => spec,
        };
        let _admitted = progress::waiting(progress, ct, self.capacity.admit(ct)).await?;
        // The last look before the child starts: after the question and the queue, a
        // directory of a judged path may have been swapped for a symlink, so the paths (and
        // the audit log) are judged where they lead now, and `--write-envs` again for a call
        // that was asked about (a bound run's wrapper checks once more, later).
        let asked = self.shared.config.confirm_writes
            && (call.class.requires_write || call.class.requires_exec);
        let again = if asked { AGAIN_ASKED } else { AGAIN };
        self.pass_all(again, ready, &mut call, caller).await?;
        // From here on the kernel holds the write to the places just judged.
        self.bound(ready, &call, &mut run).await?;
        let exec = &self.shared.host.exec;
        let outcome = match progress::run(exec, progress, &run, call.fetch_records, ct).await {
            Ok(outcome) => outcome,
            Err(error) => {
                let why = exec::plain_os_error(&error);
                tracing::error!(%why, "conda could not be started");
                return Err(ErrorData::internal_error("conda could not be started", None).into());
            }
        };
        let mut outcome = outcome;
        if run.write_bound.is_some() && outcome.limit.is_none() && refused_write(&outcome) {
            outcome.limit = Some(bound::REFUSED_WRITE.to_owned());
        }
        caller.audit.outcome(&outcome);
        if run.write_bound.is_some() {
            // conda's environment registry is the server's to keep for a bounded run.
            let succeeded = outcome.exit_code == Some(0) && !outcome.timed_out;
            let inputs = crate::host::sandbox::Inputs::from_process();
            crate::host::sandbox::bound::settle_registry(&inputs, &call.targets, succeeded);
            if let Some(bound) = &run.write_bound {
                super::new_targets::remove_unused(bound.made());
            }
        }
        if outcome.cancelled {
            return Err(Refusal::Cancelled);
        }
        if let Some(changed) = call.binding().and_then(|b| b.changed(outcome.exit_code)) {
            return Err(Refusal::Busy(confirm::plan_changed(
                &self.shared.host.audit,
                &changed,
                &caller.audit,
            )));
        }
        let class = call.class;
        let succeeded = outcome.exit_code == Some(0) && !outcome.timed_out;
        if succeeded && !class.read_only && !self.shared.restart_required() {
            self.shared.check_restart(ready).await;
        }
        // A program's output (calls that need --allow-exec) stays in stdout as printed:
        // parsing it may lose what JSON does not promise to keep (duplicate keys, digits
        // beyond f64). conda's own documents (json.dumps) lose nothing and move.
        let restart = self.shared.restart_required();
        Ok(execution_result(&outcome, restart, !class.requires_exec))
    }
}

/// Whether a bounded run that failed says a write was refused: `EACCES` (Landlock) or
/// `EROFS` (the walls' read-only mounts) in the C library's and Python's words, or
/// conda's (`Check that you have sufficient permissions`, `NotWritableError`,
/// `EnvironmentNotWritableError`).
fn refused_write(outcome: &exec::Outcome) -> bool {
    let failed = outcome.exit_code != Some(0) && !outcome.timed_out && !outcome.cancelled;
    let says = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes).to_lowercase();
        // EACCES (Landlock) or EROFS (the walls' read-only mounts).
        [
            "permission",
            "[errno 13]",
            "eacces",
            "notwritable",
            "read-only file system",
            "[errno 30]",
            "erofs",
        ]
        .iter()
        .any(|word| text.contains(word))
    };
    failed && (says(&outcome.stderr) || says(&outcome.stdout))
}
