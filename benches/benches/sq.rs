//! Criterion benchmarks of the sq scenarios (see `mlx5dp_benches::sq`
//! for what one iteration measures). One Criterion iteration is one
//! granule: a WQE, a batch of 32 WQEs, a completion, or a session.

use criterion::{criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("sq");
    for mut s in mlx5dp_benches::sq::all() {
        let granule = s.granule();
        let name = s.name().trim_start_matches("sq/");
        group.throughput(Throughput::Elements(granule));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| mlx5dp_benches::drive(&mut *s, iters * granule))
        });
    }
    group.finish();
}

/// The benchmark group (what `criterion_group!` would generate, with a
/// doc comment).
fn benches() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
}

criterion_main!(benches);
