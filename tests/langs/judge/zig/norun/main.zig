// No main function.
pub fn add(a: i64, b: i64) i64 {
    return a + b;
}
