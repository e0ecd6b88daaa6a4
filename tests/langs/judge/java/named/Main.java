import java.util.Scanner;

// Written for another judge: the public class is not Main (kiln names the file after it).
public class Different {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        System.out.println(Helper.add(in.nextLong(), in.nextLong()));
    }
}

class Helper {
    static long add(long a, long b) { return a + b; }
}
