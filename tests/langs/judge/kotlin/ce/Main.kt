fun main() {
    val (a, b) = System.`in`.bufferedReader().readText().trim().split(Regex("\\s+")).map(String::toLong)
    val sum: Int = a + b
    println(sum)
}
