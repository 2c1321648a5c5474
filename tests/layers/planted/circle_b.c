/* The other half of the planted circle (circle_a.c). */
int planted_a_calls_b(int n);
int planted_b_calls_a(int n);

int planted_b_calls_a(int n)
{
    return n <= 0 ? 0 : planted_a_calls_b(n - 1) + 1;
}
