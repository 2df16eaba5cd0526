/* Replays fuzz inputs without libFuzzer: every file named on the command line, and every file
 * in every directory named there, goes through LLVMFuzzerTestOneInput once. The committed
 * corpus runs this way in the normal test suite (ctest: test_fuzz_corpus), in every build. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerInitialize(int* argc, char*** argv);

static int run_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 0;
    }
    uint8_t* buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            if (!buf) abort();
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

static int cmp(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

int main(int argc, char** argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        struct stat s;
        if (stat(argv[i], &s) != 0) {
            fprintf(stderr, "no such file or directory: %s\n", argv[i]);
            errors++;
            continue;
        }
        if (!S_ISDIR(s.st_mode)) {
            files += run_file(argv[i]);
            continue;
        }
        DIR* d = opendir(argv[i]);
        if (!d) {
            errors++;
            continue;
        }
        char** names = NULL;
        size_t n = 0;
        for (struct dirent* e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[n++], "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof *names, cmp); /* a fixed order */
        for (size_t j = 0; j < n; j++) files += run_file(names[j]), free(names[j]);
        free(names);
    }
    printf("fuzz replay: %d inputs, every property held\n", files);
    if (files == 0) fprintf(stderr, "fuzz replay: no input\n");
    return errors || files == 0 ? 1 : 0;
}
