//! Checkpoint and restore of a process's GPU state (include/cuabi/checkpoint.h):
//! lock a CUDA process, checkpoint it (its device memory released), restore
//! it (optionally onto other GPUs named by UUID) and unlock it.
use crate::error::{check, Result};
use crate::sys;

/// A process's checkpoint state (`cuabi_process_state`).
pub type ProcessState = sys::cuabi_process_state;

/// A CUDA process, by pid (cuda.core's checkpoint.Process).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Process {
    pid: i32,
}

impl Process {
    pub fn new(pid: i32) -> Process {
        Process { pid }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Its state: running, locked, checkpointed, failed, ...
    pub fn state(&self) -> Result<ProcessState> {
        let mut s = sys::CUABI_PROCESS_STATE_RUNNING;
        // SAFETY: `s` is a local written during the call; the pid is a plain int.
        check(unsafe { sys::cuabi_checkpoint_process_state(&mut s, self.pid) })?;
        Ok(s)
    }

    /// The state's name ("running", ...).
    pub fn state_name(state: ProcessState) -> String {
        // SAFETY: checkpoint.h: cuabi_process_state_name returns a static
        // NUL-terminated name, "never NULL"; it is copied before the borrow ends.
        unsafe { std::ffi::CStr::from_ptr(sys::cuabi_process_state_name(state)) }.to_string_lossy().into_owned()
    }

    /// The thread the driver restores through.
    pub fn restore_thread_id(&self) -> Result<i32> {
        let mut t = 0;
        // SAFETY: `t` is a local written during the call.
        check(unsafe { sys::cuabi_checkpoint_process_restore_thread_id(&mut t, self.pid) })?;
        Ok(t)
    }

    /// Lock it (its CUDA calls block), waiting at most `timeout_ms` (0: no limit).
    pub fn lock(&self, timeout_ms: u32) -> Result<()> {
        // SAFETY: plain values only; checkpoint.h: the pid is checked (unknown pid: NOT_FOUND).
        check(unsafe { sys::cuabi_checkpoint_process_lock(self.pid, timeout_ms) })
    }

    /// Checkpoint it (locked): its device memory moves to host memory.
    pub fn checkpoint(&self) -> Result<()> {
        // SAFETY: plain values only; checkpoint.h: the pid is checked (unknown pid: NOT_FOUND).
        check(unsafe { sys::cuabi_checkpoint_process_checkpoint(self.pid) })
    }

    /// Restore it (then locked); `pairs`: (old GPU UUID, new GPU UUID).
    pub fn restore(&self, pairs: &[([u8; 16], [u8; 16])]) -> Result<()> {
        let c: Vec<sys::cuabi_checkpoint_gpu_pair> = pairs
            .iter()
            .map(|(o, n)| sys::cuabi_checkpoint_gpu_pair { old_uuid: *o, new_uuid: *n })
            .collect();
        let p = if c.is_empty() { core::ptr::null() } else { c.as_ptr() };
        // SAFETY: `p` is NULL with count 0, or `c`'s `c.len()` pairs, read during the call.
        check(unsafe { sys::cuabi_checkpoint_process_restore(self.pid, p, c.len()) })
    }

    /// Unlock it: its CUDA calls proceed.
    pub fn unlock(&self) -> Result<()> {
        // SAFETY: plain values only; checkpoint.h: the pid is checked (unknown pid: NOT_FOUND).
        check(unsafe { sys::cuabi_checkpoint_process_unlock(self.pid) })
    }
}
