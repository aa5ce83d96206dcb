//! Lays the `landwall` binary out in a given function order when `LANDWALL_HOT_ORDER` names
//! an order file (lld's `--symbol-ordering-file`; `make release-static` writes it from
//! shim/hot-functions.txt with scripts/hot-order.sh). The functions one launch runs then sit
//! together: the shim faults in a few pages of code rather than one in every 64 KiB of the
//! binary, on every agent launch. Without the variable, nothing changes.

fn main() {
    println!("cargo:rerun-if-env-changed=LANDWALL_HOT_ORDER");
    let Some(order) = std::env::var_os("LANDWALL_HOT_ORDER") else {
        return;
    };
    let Some(order) = order.to_str().filter(|o| !o.is_empty()) else {
        println!("cargo:warning=LANDWALL_HOT_ORDER is not a UTF-8 path; no function order");
        return;
    };
    // A new order relinks the binary.
    println!("cargo:rerun-if-changed={order}");
    println!("cargo:rustc-link-arg-bin=landwall=-Wl,--symbol-ordering-file={order}");
    // Names in the file that this build does not have (it is a list for every build).
    println!("cargo:rustc-link-arg-bin=landwall=-Wl,--no-warn-symbol-ordering");
}
