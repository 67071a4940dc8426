/* Prints, for each key, the index of the server libmemcached picks in
 * weighted ketama mode (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED), through
 * libmemcached's own memcached_generate_hash. Nothing connects anywhere.
 *
 * usage: libmemcached_owner KEYFILE < CONFIGS
 * each config line: "n host port weight host port weight ...";
 * output: one line per config, the owner index of every key, space-separated.
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s KEYFILE < CONFIGS\n", argv[0]); return 2; }
  FILE *kf = fopen(argv[1], "r");
  if (!kf) { perror(argv[1]); return 2; }
  size_t cap = 1024, nkeys = 0;
  char **keys = malloc(cap * sizeof *keys);
  size_t *lens = malloc(cap * sizeof *lens);
  char *line = NULL; size_t lcap = 0; ssize_t n;
  while ((n = getline(&line, &lcap, kf)) > 0) {
    if (line[n - 1] == '\n') n--;
    if (nkeys == cap) { cap *= 2; keys = realloc(keys, cap * sizeof *keys); lens = realloc(lens, cap * sizeof *lens); }
    keys[nkeys] = malloc(n + 1); memcpy(keys[nkeys], line, n); keys[nkeys][n] = 0; lens[nkeys++] = n;
  }
  fclose(kf);
  while ((n = getline(&line, &lcap, stdin)) > 0) {
    memcached_st *m = memcached_create(NULL);
    if (memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS) { fprintf(stderr, "behavior\n"); return 1; }
    char *save = NULL;
    int count = atoi(strtok_r(line, " \n", &save));
    for (int i = 0; i < count; i++) {
      char *host = strtok_r(NULL, " \n", &save);
      int port = atoi(strtok_r(NULL, " \n", &save));
      int weight = atoi(strtok_r(NULL, " \n", &save));
      if (memcached_server_add_with_weight(m, host, port, weight) != MEMCACHED_SUCCESS) { fprintf(stderr, "add %s:%d\n", host, port); return 1; }
    }
    for (size_t k = 0; k < nkeys; k++)
      printf(k ? " %u" : "%u", memcached_generate_hash(m, keys[k], lens[k]));
    printf("\n");
    memcached_free(m);
  }
  return 0;
}
