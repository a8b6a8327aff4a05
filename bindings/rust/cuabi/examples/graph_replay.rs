//! CUDA graphs: the segmented reduction of 64 batches captured once from
//! ordinary launches and replayed. `cargo run --offline --example graph_replay`.
//! Without a GPU it compiles the kernel and says the rest is skipped.
use cuabi::{sys, ArgPack, Device, DevicePtr, LaunchConfig, MemoryResource, Program, ProgramOptions, Stream};

const KERNEL: &str = r#"
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets) {
  __shared__ T part[BLOCK];
  int s = blockIdx.x, t = threadIdx.x;
  T acc = 0;
  for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];
  part[t] = acc; __syncthreads();
  for (int w = BLOCK / 2; w > 0; w /= 2) { if (t < w) part[t] += part[t + w]; __syncthreads(); }
  if (t == 0) out[s] = part[0];
}
"#;
const BATCHES: usize = 64;
const SEGS: usize = 8;
const SEG_LEN: usize = 100;

fn main() -> cuabi::Result<()> {
    let gpus = cuabi::device_count().unwrap_or(0);
    let mut options = ProgramOptions::new().name_expression("segred<float, 128>");
    if gpus == 0 {
        options = options.arch("sm_90");
    }
    let code = Program::new(KERNEL, Some("segred.cu"))?.compile(&options)?;
    if gpus == 0 {
        println!("segred<float, 128> compiled; no GPU, so capture and replay are skipped");
        return Ok(());
    }
    let k = code.kernel("segred<float, 128>")?;
    let dev = Device::get(0)?;
    let res = MemoryResource::device_default(&dev)?;
    let s = Stream::new(&dev)?;
    let input: Vec<f32> = (0..BATCHES * SEGS * SEG_LEN).map(|i| (i % 10) as f32).collect();
    let offsets: Vec<i32> = (0..=SEGS).map(|i| (i * SEG_LEN) as i32).collect();
    let mut din = res.allocate(4 * input.len(), 0, Some(&s))?;
    let mut doff = res.allocate(4 * offsets.len(), 0, Some(&s))?;
    let dout = res.allocate(4 * BATCHES * SEGS, 0, Some(&s))?;
    s.synchronize()?;
    din.copy_from_host(0, &input)?;
    doff.copy_from_host(0, &offsets)?;
    let (pin, pout) = (din.pointer() as u64, dout.pointer() as u64);
    let cfg = LaunchConfig::new(SEGS as u32, 128).on_stream(&s);
    // Capture: the 64 launches are recorded, not run.
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    let graph = unsafe { s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |_| {
        for b in 0..BATCHES {
            let pack = ArgPack::builder()
                .arg(DevicePtr(pin + (4 * b * SEGS * SEG_LEN) as u64))
                .arg(DevicePtr(pout + (4 * b * SEGS) as u64))
                .arg(doff.arg())
                .build()?;
            cuabi::launch(&k, &pack, &cfg)?;
        }
        Ok(())
    }) }?;
    let exe = graph.instantiate()?;
    for _ in 0..10 {
        exe.launch(&s)?; // one call runs all 64 kernels
    }
    s.synchronize()?;
    let out = dout.to_vec::<f32>()?;
    println!("captured {} launches, replayed 10 times", graph.node_count());
    assert!(out.iter().all(|&v| v == 450.0), "every segment sums to 450");
    Ok(())
}
