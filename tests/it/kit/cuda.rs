//! conda's CUDA probe, skipped where a test's claim does not involve it.
//!
//! Every conda process that computes its virtual packages (`conda info`, a solve, a dry
//! run) probes for a CUDA driver in a `multiprocessing` *spawn* child: two more Python
//! start-ups, about 0.2–0.3 s of CPU per call on the test machine
//! (conda/plugins/virtual_packages/cuda.py). `CONDA_OVERRIDE_CUDA=""` (conda's documented
//! override: no `__cuda`) skips the probe; the server passes its environment on to conda.
//!
//! Only for tests whose claim is not about what conda's children do: tests of the
//! sandbox, of devices, of a hostile working directory or planted modules, of warm
//! children and of the limits on a call's descendants keep conda's default, probe
//! included.

/// The variable that skips the probe, for a server's (or a conda run's) environment.
pub(crate) const SKIP_PROBE: (&str, &str) = ("CONDA_OVERRIDE_CUDA", "");
