// No main function.
#[allow(dead_code)]
fn add(a: i64, b: i64) -> i64 { a + b }
