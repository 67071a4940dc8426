// The ~1 KB article-like record of the Node benchmarks (JSON ~887 bytes).
export function record(i) {
  const words = ['yen', 'rates', 'bank', 'market', 'policy', 'inflation', 'bond', 'yield', 'trade', 'export'];
  let body = '';
  for (let j = 0; body.length < 700; j++) body += words[(i * 7 + j * 3) % words.length] + ' ';
  return { id: i, title: `Article ${i}: the yen and the rates`, author: { id: i % 97, name: `Author ${i % 97}` }, tags: ['economy', 'japan', `t${i % 13}`], published: '2026-11-24T22:00:00Z', views: i * 31, body };
}
