/*
 * A planted file-level call circle (with circle_b.c), which the circle
 * check must find: a_calls_b here calls b_calls_a there, which calls back.
 */
int planted_b_calls_a(int n);
int planted_a_calls_b(int n);

int planted_a_calls_b(int n)
{
    return n <= 0 ? 0 : planted_b_calls_a(n - 1) + 1;
}
