import java.util.Scanner;

// No public class: the class run is the one declaring main.
class Helper {
    static long add(long a, long b) { return a + b; }
}

final class Solution {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.println(Helper.add(in.nextLong(), in.nextLong()));
    }
}
