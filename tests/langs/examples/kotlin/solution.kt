package solution

fun solution(a: Int, b: Int): Int {
    println("adding $a and $b")
    return a + b
}
