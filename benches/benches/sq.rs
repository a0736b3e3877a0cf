//! Criterion benchmarks of the sq scenarios (see `mlx5dp_benches::sq`
//! for what one iteration measures). One Criterion iteration is one
//! granule: a WQE, a batch of 32 WQEs, a completion, or a session; for
//! the `tx/*` scenarios (issue 7), a `tx_burst` of 32 packets (reported
//! per packet); for the `rq/*` ones, receive WQEs. Groups follow the
//! scenario name's prefix (`sq`, `tx`, `rq`).

use criterion::{criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let mut all = mlx5dp_benches::sq::all();
    all.extend(mlx5dp_benches::tx::all());
    all.extend(mlx5dp_benches::rq::all());
    for prefix in ["sq", "tx", "rq"] {
        let mut group = c.benchmark_group(prefix);
        for s in all.iter_mut() {
            let Some((p, name)) = s.name().split_once('/') else {
                continue;
            };
            if p != prefix {
                continue;
            }
            let granule = s.granule();
            group.throughput(Throughput::Elements(granule));
            group.bench_function(name, |b| {
                b.iter_custom(|iters| mlx5dp_benches::drive(&mut **s, iters * granule))
            });
        }
        group.finish();
    }
}

/// The benchmark group (what `criterion_group!` would generate, with a
/// doc comment).
fn benches() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
}

criterion_main!(benches);
