package solution;

import java.util.*;

public class Solution {
    public int solution(int a, int b) {
        System.out.println("adding " + a + " and " + b);
        return a + b;
    }
}
