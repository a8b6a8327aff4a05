//! The safe launch path's own per-launch cost, in nanoseconds, against the
//! C `cuabi_launch` of the same kernel in the same process (issue 28). Runs
//! without a GPU on the C tests' fake driver, whose launch does almost
//! nothing, so what is left is the Rust side's work:
//!
//!   CUABI_DRIVER_PATH=build/tests/fixtures/.libs/fake_cuda_graph.so \
//!       bench_launch_overhead [launches per block (20000)] [blocks (31)]
//!
//! (on a GPU it runs too; bench_launch is the GPU benchmark). The kernel is
//! `__global__ void k(float *p, long long n, double s)` (three 8-byte
//! parameters, what the fake driver reports for every kernel), compiled as
//! C++ so the safe launch checks each argument's kind. Modes, each once per
//! block in a rotating order, the stream drained before each:
//!
//!   sys     `sys::cuabi_launch(kernel, pack, &config)`, pack and C config made once;
//!   safe    `stream.launch_builder(&k).arg(&mut p).arg(&n).arg(&s).launch(cfg)`;
//!   unsafe  `cuabi::launch(&k, &pack, &cfg)` (the Rust wrapper of the C call).
//!
//! Prints each mode's median ns per launch, its difference to `sys` (the
//! Rust side's own work) and the median over blocks of its ratio to `sys`.
use std::time::Instant;

use cuabi::{sys, ArgPack, Device, LaunchConfig, Program, ProgramOptions, Stream};

const SRC: &str = "__global__ void k(float *p, long long n, double s) {}\n";

fn main() -> cuabi::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20000).max(1);
    let blocks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(31).max(1);
    if !matches!(cuabi::device_count(), Ok(d) if d > 0) {
        println!("bench_launch_overhead: no device (set CUABI_DRIVER_PATH to the fake driver); nothing measured");
        return Ok(());
    }
    let dev = Device::get(0)?;
    let mut prog = Program::new(SRC, Some("empty.cu"))?;
    let code = prog.compile(&ProgramOptions::new().arch("sm_90").name_expression("k"))?;
    let k = code.kernel("k")?;
    let stream = Stream::new(&dev)?;
    let mut p = stream.alloc_zeros::<f32>(1)?;
    let (count, scale) = (1000i64, 2.0f64);
    let cfg = LaunchConfig::new(1, 32).on_stream(&stream);
    let mut pack = ArgPack::for_kernel(&k)?;
    pack.set(0, &cuabi::DevicePtr(0))?;
    pack.set(1, &count)?;
    pack.set(2, &scale)?;
    let ccfg = cfg.to_c()?;

    stream.launch_builder(&k).arg(&mut p).arg(&count).arg(&scale).launch(cfg)?;
    stream.synchronize()?;

    const MODES: usize = 3;
    let names = ["sys: cuabi_launch", "safe: launch_builder", "unsafe: cuabi::launch"];
    let mut times = vec![[0f64; MODES]; blocks];
    for (b, row) in times.iter_mut().enumerate() {
        for j in 0..MODES {
            let m = (j + b) % MODES;
            stream.synchronize()?;
            let t0 = Instant::now();
            match m {
                0 => {
                    for _ in 0..n {
                        // SAFETY: a null pointer and two values for an empty kernel.
                        let st = unsafe { sys::cuabi_launch(k.as_raw(), pack.as_raw(), &ccfg) };
                        if st != sys::CUABI_SUCCESS {
                            return Err(cuabi::Error::from_status(st));
                        }
                    }
                }
                1 => {
                    for _ in 0..n {
                        stream.launch_builder(&k).arg(&mut p).arg(&count).arg(&scale).launch(cfg)?;
                    }
                }
                _ => {
                    for _ in 0..n {
                        // SAFETY: as mode 0.
                        unsafe { cuabi::launch(&k, &pack, &cfg) }?;
                    }
                }
            }
            row[m] = t0.elapsed().as_secs_f64() / n as f64 * 1e9;
        }
    }
    stream.synchronize()?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!("per-launch cost, k(float*, long long, double), {blocks} interleaved blocks of {n} launches");
    println!("  {:<24} {:>10} {:>12} {:>12}", "", "median ns", "- sys ns", "median ratio");
    let sys_med = median(times.iter().map(|r| r[0]).collect());
    for (m, name) in names.iter().enumerate() {
        let med = median(times.iter().map(|r| r[m]).collect());
        let ratio = median(times.iter().map(|r| r[m] / r[0]).collect());
        println!("  {name:<24} {med:>10.1} {:>12.1} {ratio:>12.3}", med - sys_med);
    }
    Ok(())
}
