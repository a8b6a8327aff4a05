//! Segmented reduction: sum each segment of a vector, segments given by
//! offsets (CSR style). Run with `cargo run --offline --example segmented_reduction`.
//!
//! The kernel's parameter list is built with the typed argument builder;
//! the host reference result is computed and printed. With a GPU, the
//! device, a stream and timing events are set up around the (future) launch:
//! compiling and launching arrive with the program and launch modules.
use cuabi::{ArgPack, DevicePtr, Device, Event, Stream};

/// The CUDA C++ kernel the example launches: one block per segment.
pub const KERNEL: &str = r#"
extern "C" __global__ void segmented_sum(const float *in, const int *offsets,
                                         float *out, int segments)
{
    int seg = blockIdx.x;
    if (seg >= segments) return;
    float acc = 0.0f;
    for (int i = offsets[seg] + threadIdx.x; i < offsets[seg + 1]; i += blockDim.x)
        acc += in[i];
    __shared__ float part[256];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[seg] = part[0];
}
"#;

fn host_reference(input: &[f32], offsets: &[i32]) -> Vec<f32> {
    offsets.windows(2).map(|w| input[w[0] as usize..w[1] as usize].iter().sum()).collect()
}

fn main() -> cuabi::Result<()> {
    let input: Vec<f32> = (0..1000).map(|i| (i % 7) as f32).collect();
    let offsets: Vec<i32> = vec![0, 10, 250, 251, 600, 1000];
    let expect = host_reference(&input, &offsets);
    println!("cuabi {} — segments: {}", cuabi::version(), expect.len());

    // Parameters of segmented_sum: (const float*, const int*, float*, int).
    let pack = ArgPack::builder()
        .arg(DevicePtr(0)).arg(DevicePtr(0)).arg(DevicePtr(0))
        .arg((offsets.len() - 1) as i32)
        .build()?;
    println!("argument pack: {} parameters, {} bytes", pack.len()?, pack.blob_size()?);

    match cuabi::device_count() {
        Ok(n) if n > 0 => {
            let dev = Device::get(0)?;
            println!("GPU 0: {}", dev.properties()?.name());
            let stream = Stream::new(&dev)?;
            let (start, stop) = (Event::new(&dev)?, Event::new(&dev)?);
            start.record(&stream)?;
            stop.record(&stream)?;
            stop.synchronize()?;
            println!("stream round trip: {:.3} ms", start.elapsed_ms(&stop)?);
        }
        Ok(_) => println!("no GPU: host reference only"),
        Err(e) => println!("no CUDA driver ({}): host reference only", e.status_name()),
    }
    println!("sums: {expect:?}");
    Ok(())
}
