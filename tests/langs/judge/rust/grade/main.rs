use std::io::Read;

// What a judge's build gives: optimized (an overflow wraps, where a debug build panics), with
// ONLINE_JUDGE configured.
fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    let a: i32 = input.trim().parse().unwrap();
    let square = a * a;
    println!("{} {}", square, if cfg!(ONLINE_JUDGE) { "judge-grade" } else { "debug" });
}
