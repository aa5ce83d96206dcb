//! Dropping every capability before the wall goes up.
//!
//! Order: bounding set first (dropping it needs CAP_SETPCAP, which the later steps remove),
//! then ambient, then inheritable, effective and permitted together (one `capset`). Each
//! step is checked, and the result is read back: a set that is not empty afterwards is an
//! error, never a warning.

use std::io;

use crate::sys;

/// Why the capabilities could not be dropped.
#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    /// A set could not be changed.
    #[error("dropping the {set} capability set: {why}")]
    Drop {
        /// Which set.
        set: &'static str,
        /// Why.
        why: String,
    },
    /// A set is not empty after dropping it.
    #[error("the {set} capability set is not empty after dropping it")]
    StillHeld {
        /// Which set.
        set: &'static str,
    },
}

/// Capabilities are numbered from 0; the kernel answers EINVAL past its last one.
/// 64 bounds the loop whatever the kernel: the capability sets are 64-bit.
const CAP_LIMIT: u32 = 64;
const CAP_SETPCAP: u32 = 8;

fn drop_err(set: &'static str) -> impl Fn(io::Error) -> CapsError {
    move |e| CapsError::Drop {
        set,
        why: e.to_string(),
    }
}

/// Empties the capability sets; every call is checked. Returns whether the bounding set
/// was dropped (see step 1). That the sets are then empty is checked again by the launch's
/// self-check, after the wall is up (`capget`, and `prctl` for the ambient and bounding
/// sets).
pub fn drop_all() -> Result<bool, CapsError> {
    let [effective, permitted, _] = sys::capget().map_err(drop_err("effective"))?;
    let have_setpcap = effective & (1 << CAP_SETPCAP) != 0;
    // 1. Bounding. Without CAP_SETPCAP the kernel forbids it; that only happens for a process
    //    that holds no capabilities at all, which — with no_new_privs set next — can never
    //    gain one through exec, so the bounding set is then moot rather than a hole.
    if have_setpcap {
        for cap in 0..CAP_LIMIT {
            match sys::capbset_drop(cap) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => {
                    return Err(CapsError::Drop {
                        set: "bounding",
                        why: format!("capability {cap}: {e}"),
                    })
                }
            }
        }
    } else if permitted != 0 {
        return Err(CapsError::Drop {
            set: "bounding",
            why: format!("CAP_SETPCAP (capability {CAP_SETPCAP}) is not effective but other capabilities are permitted"),
        });
    }
    // 2. Ambient; 3.–5. inheritable, effective and permitted, in one capset.
    sys::ambient_clear_all().map_err(drop_err("ambient"))?;
    sys::capset_clear().map_err(drop_err("inheritable, effective and permitted"))?;
    // Read back: the self-check asks again from inside the wall, but an error here names the
    // step that failed.
    let [eff, prm, inh] = sys::capget().map_err(drop_err("effective"))?;
    for (set, bits) in [("effective", eff), ("permitted", prm), ("inheritable", inh)] {
        if bits != 0 {
            return Err(CapsError::StillHeld { set });
        }
    }
    Ok(have_setpcap)
}
