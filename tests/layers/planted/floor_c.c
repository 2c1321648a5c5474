/* A floor beside the planted circle: called, calls nothing back. */
int planted_floor(int n);

int planted_floor(int n)
{
    return n * 2;
}
