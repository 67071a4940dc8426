// Package corpus generates deterministic, realistic test data for kura's
// benchmarks and demo: news-site articles in Japanese and English (10-20 KB
// as JSON, like the ~14.6 KB articles of the field report behind seed 000)
// and small per-user game inventory records (~300 B, like the memcached
// records of seed 001).
//
// The same seed always yields the same data, on every platform and Go
// version that keeps math/rand/v2's PCG stable. Text is built from word and
// phrase pools, so it compresses like prose rather than like random bytes.
// The package uses only the standard library and is fast (well under a
// millisecond per article). It is not a general fake-data library.
package corpus

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Article is one news article as a news site's API would cache it.
type Article struct {
	ID                 int64     `json:"id" msgpack:"id"`
	Slug               string    `json:"slug" msgpack:"slug"`
	URL                string    `json:"url" msgpack:"url"`
	Language           string    `json:"language" msgpack:"language"`
	Title              string    `json:"title" msgpack:"title"`
	Subtitle           string    `json:"subtitle" msgpack:"subtitle"`
	Summary            string    `json:"summary" msgpack:"summary"`
	Author             Author    `json:"author" msgpack:"author"`
	Category           Category  `json:"category" msgpack:"category"`
	Tags               []string  `json:"tags" msgpack:"tags"`
	PublishedAt        time.Time `json:"published_at" msgpack:"published_at"`
	UpdatedAt          time.Time `json:"updated_at" msgpack:"updated_at"`
	Body               []string  `json:"body" msgpack:"body"`
	Images             []Image   `json:"images" msgpack:"images"`
	RelatedIDs         []int64   `json:"related_ids" msgpack:"related_ids"`
	ViewCount          int64     `json:"view_count" msgpack:"view_count"`
	CommentCount       int       `json:"comment_count" msgpack:"comment_count"`
	ReadingTimeMinutes int       `json:"reading_time_minutes" msgpack:"reading_time_minutes"`
	Premium            bool      `json:"premium" msgpack:"premium"`
	Sponsored          bool      `json:"sponsored" msgpack:"sponsored"`
	Status             string    `json:"status" msgpack:"status"`
	SEO                SEO       `json:"seo" msgpack:"seo"`
}

// Author is an article's byline.
type Author struct {
	ID        int64  `json:"id" msgpack:"id"`
	Name      string `json:"name" msgpack:"name"`
	Role      string `json:"role" msgpack:"role"`
	Bio       string `json:"bio" msgpack:"bio"`
	AvatarURL string `json:"avatar_url" msgpack:"avatar_url"`
	Twitter   string `json:"twitter,omitempty" msgpack:"twitter,omitempty"`
}

// Category is an article's section.
type Category struct {
	ID   int    `json:"id" msgpack:"id"`
	Slug string `json:"slug" msgpack:"slug"`
	Name string `json:"name" msgpack:"name"`
}

// Image is a picture in an article.
type Image struct {
	URL     string `json:"url" msgpack:"url"`
	Alt     string `json:"alt" msgpack:"alt"`
	Caption string `json:"caption" msgpack:"caption"`
	Credit  string `json:"credit" msgpack:"credit"`
	Width   int    `json:"width" msgpack:"width"`
	Height  int    `json:"height" msgpack:"height"`
}

// SEO holds the page metadata.
type SEO struct {
	MetaTitle       string `json:"meta_title" msgpack:"meta_title"`
	MetaDescription string `json:"meta_description" msgpack:"meta_description"`
	CanonicalURL    string `json:"canonical_url" msgpack:"canonical_url"`
	OGImage         string `json:"og_image" msgpack:"og_image"`
}

// Articles returns n articles: Article(seed, 0) .. Article(seed, n-1).
func Articles(seed int64, n int) []Article {
	out := make([]Article, n)
	for i := range out {
		out[i] = NewArticle(seed, i)
	}
	return out
}

// NewArticle returns article i of the corpus for seed. It depends only on
// (seed, i), so any article can be generated alone.
func NewArticle(seed int64, i int) Article {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(i)*0x9E3779B97F4A7C15+1))
	g := gen{r: r}
	id := int64(1_000_000 + i)
	ja := r.IntN(10) < 7 // seven in ten articles are Japanese, as on a Japanese site
	cat := r.IntN(len(categories))
	pub := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(3 * 365 * 24 * time.Hour)))).Truncate(time.Second)
	a := Article{
		ID:           id,
		Language:     "en",
		Category:     Category{ID: cat + 1, Slug: categories[cat].Slug, Name: categories[cat].Name},
		PublishedAt:  pub,
		UpdatedAt:    pub.Add(time.Duration(r.Int64N(int64(72 * time.Hour)))).Truncate(time.Second),
		ViewCount:    r.Int64N(500_000),
		CommentCount: r.IntN(300),
		Premium:      r.IntN(5) == 0,
		Sponsored:    r.IntN(12) == 0,
		Status:       "published",
	}
	if ja {
		a.Language = "ja"
		a.Title = strings.TrimSuffix(g.jaSentence(), "。")
		a.Subtitle = strings.TrimSuffix(g.jaSentence(), "。")
		a.Summary = g.jaSentence() + g.jaSentence() + g.jaSentence()
	} else {
		a.Title = strings.TrimSuffix(g.enSentence(), ".")
		a.Subtitle = strings.TrimSuffix(g.enSentence(), ".")
		a.Summary = g.enSentence() + " " + g.enSentence()
	}
	a.Slug = fmt.Sprintf("%s-%s-%d", a.Category.Slug, pick(r, []string{"news", "analysis", "guide", "column", "interview", "explainer"}), id)
	a.URL = "https://money.example.jp/articles/" + a.Slug
	a.Author = g.author()
	for n := 3 + r.IntN(5); n > 0; n-- {
		a.Tags = append(a.Tags, pick(r, tagPool))
	}
	for n := 1 + r.IntN(4); n > 0; n-- {
		w, h := 1200, 630+r.IntN(4)*90
		a.Images = append(a.Images, Image{
			URL:     fmt.Sprintf("https://img.example.jp/articles/%d/%08x.jpg", id, r.Uint32()),
			Alt:     pick(r, captions),
			Caption: pick(r, captions),
			Credit:  pick(r, credits),
			Width:   w, Height: h,
		})
	}
	for n := 4 + r.IntN(6); n > 0; n-- {
		a.RelatedIDs = append(a.RelatedIDs, 1_000_000+r.Int64N(1_000_000))
	}
	a.SEO = SEO{
		MetaTitle:       a.Title + "｜マネー編集部",
		MetaDescription: a.Summary,
		CanonicalURL:    a.URL,
		OGImage:         a.Images[0].URL,
	}

	// Size the body so the whole article lands between 10 and 20 KB of
	// JSON. fixed approximates everything but the body.
	target := 10_300 + r.IntN(9_200)
	fixed := 700 + len(a.Title) + len(a.Subtitle) + 2*len(a.Summary) + len(a.Author.Bio) + len(a.Slug)*3
	for _, im := range a.Images {
		fixed += len(im.URL) + len(im.Alt) + len(im.Caption) + len(im.Credit) + 70
	}
	for _, t := range a.Tags {
		fixed += len(t) + 3
	}
	fixed += len(a.RelatedIDs) * 8
	size := fixed
	for size < target {
		var p string
		if ja {
			p = g.jaParagraph()
		} else {
			p = g.enParagraph()
		}
		if size+len(p)+3 > target+400 && len(a.Body) > 3 {
			break
		}
		a.Body = append(a.Body, p)
		size += len(p) + 3
	}
	chars := 0
	for _, p := range a.Body {
		chars += len([]rune(p))
	}
	if ja {
		a.ReadingTimeMinutes = 1 + chars/500
	} else {
		a.ReadingTimeMinutes = 1 + chars/1200
	}
	return a
}

type gen struct{ r *rand.Rand }

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// fill formats a pool entry's %d verbs with plausible numbers.
func (g gen) fill(s string) string {
	n := strings.Count(s, "%d")
	if n == 0 {
		return s
	}
	args := make([]any, n)
	for i := range args {
		args[i] = 1 + g.r.IntN(pick(g.r, []int{10, 100, 1000, 10000}))
	}
	return fmt.Sprintf(s, args...)
}

func (g gen) jaSentence() string {
	r := g.r
	switch r.IntN(10) {
	case 0:
		return pick(r, jaConnectors) + g.fill(pick(r, jaFacts))
	case 1:
		return pick(r, jaAdvice)
	case 2, 3:
		return pick(r, jaConnectors) + pick(r, jaSubjects) + pick(r, jaObjects) + pick(r, jaVerbs)
	default:
		var b strings.Builder
		b.WriteString(pick(r, jaConnectors))
		b.WriteString(pick(r, jaTimes))
		b.WriteString(g.jaNounPhrase())
		b.WriteString(pick(r, []string{"は", "が", "では", "について、"}))
		if r.IntN(3) == 0 {
			b.WriteString(g.fill(pick(r, []string{"前年比%d.%d%%の", "約%d割の", "%d年ぶりの", "%d兆円規模の", "月%d万円程度の"})))
		}
		b.WriteString(g.jaNounPhrase())
		b.WriteString(pick(r, jaVerbEnds))
		b.WriteString(pick(r, []string{"。", "。", "とみられる。", "という。", "と指摘する声もある。"}))
		return b.String()
	}
}

func (g gen) jaNounPhrase() string {
	r := g.r
	s := pick(r, jaNouns)
	for n := r.IntN(3); n > 0; n-- {
		s += pick(r, jaParticles) + pick(r, jaNouns)
	}
	return s
}

func (g gen) enSentence() string {
	r := g.r
	switch r.IntN(8) {
	case 0:
		return fmt.Sprintf("%q, %s said.", pick(r, enQuotes), pick(r, enNames))
	case 1, 2:
		return pick(r, enSubjects) + " " + pick(r, enVerbs) + " " + pick(r, enObjects) + " " + g.fill(pick(r, enTails))
	default:
		s := pick(r, enAdjs) + " " + pick(r, enNouns)
		s = strings.ToUpper(s[:1]) + s[1:] + " " + pick(r, enVerbs2) + " " + pick(r, enAdjs) + " " + pick(r, enNouns) +
			" " + pick(r, enPreps) + " " + pick(r, enNouns)
		if r.IntN(2) == 0 {
			s += ", " + pick(r, []string{"while", "as", "although", "because", "even as"}) + " " + pick(r, enNouns) + " " +
				pick(r, enVerbs2) + " " + pick(r, enAdjs) + " " + pick(r, enNouns)
		}
		return g.fill(s + pick(r, []string{".", ".", " by %d.%d%%.", " in %d.", " for a %dth month."}))
	}
}

func (g gen) jaParagraph() string {
	var b strings.Builder
	for n := 2 + g.r.IntN(4); n > 0; n-- {
		b.WriteString(g.jaSentence())
	}
	if g.r.IntN(4) == 0 {
		// Japanese finance copy quotes English sources and tickers.
		b.WriteString("（" + g.enSentence() + "）")
	}
	return b.String()
}

func (g gen) enParagraph() string {
	var b strings.Builder
	for n := 2 + g.r.IntN(4); n > 0; n-- {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.enSentence())
	}
	return b.String()
}

func (g gen) author() Author {
	r := g.r
	i := r.IntN(len(jaNames))
	a := Author{
		ID:        int64(100 + i),
		Name:      jaNames[i],
		Role:      pick(r, jaRoles),
		AvatarURL: fmt.Sprintf("https://img.example.jp/authors/%d.png", 100+i),
	}
	if r.IntN(3) == 0 {
		a.Name = enNames[i%len(enNames)]
		a.Twitter = "@" + strings.ToLower(strings.ReplaceAll(a.Name, " ", "_"))
	}
	a.Bio = a.Role + "。" + pick(r, jaBioTails) + pick(r, jaBioTails)
	return a
}

// Item is one entry of a user's game inventory: the small record (about
// 300 bytes as JSON) that a game caches per user in memcached.
type Item struct {
	UserID     int64     `json:"user_id" msgpack:"user_id"`
	ItemID     int64     `json:"item_id" msgpack:"item_id"`
	MasterID   int       `json:"master_id" msgpack:"master_id"`
	Name       string    `json:"name" msgpack:"name"`
	Kind       string    `json:"kind" msgpack:"kind"`
	Rarity     int       `json:"rarity" msgpack:"rarity"`
	Level      int       `json:"level" msgpack:"level"`
	Exp        int64     `json:"exp" msgpack:"exp"`
	Count      int       `json:"count" msgpack:"count"`
	Locked     bool      `json:"locked" msgpack:"locked"`
	Favorite   bool      `json:"favorite" msgpack:"favorite"`
	Attack     int       `json:"attack" msgpack:"attack"`
	Defense    int       `json:"defense" msgpack:"defense"`
	Skills     []int     `json:"skills" msgpack:"skills"`
	AcquiredAt time.Time `json:"acquired_at" msgpack:"acquired_at"`
	UpdatedAt  time.Time `json:"updated_at" msgpack:"updated_at"`
}

// Inventory returns the n items of one user's inventory for seed.
func Inventory(seed, userID int64, n int) []Item {
	r := rand.New(rand.NewPCG(uint64(seed)^0xA5A5A5A5, uint64(userID)))
	base := time.Date(2023, 4, 1, 0, 0, 0, 0, time.UTC)
	out := make([]Item, n)
	for i := range out {
		master := 1 + r.IntN(len(itemNames)*10)
		acq := base.Add(time.Duration(r.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Second)
		it := Item{
			UserID:     userID,
			ItemID:     userID*10_000 + int64(i),
			MasterID:   master,
			Name:       itemNames[master%len(itemNames)],
			Kind:       itemKinds[master%len(itemKinds)],
			Rarity:     1 + r.IntN(6),
			Level:      1 + r.IntN(99),
			Exp:        r.Int64N(1_000_000),
			Count:      1 + r.IntN(99),
			Locked:     r.IntN(4) == 0,
			Favorite:   r.IntN(8) == 0,
			Attack:     r.IntN(5000),
			Defense:    r.IntN(5000),
			AcquiredAt: acq,
			UpdatedAt:  acq.Add(time.Duration(r.Int64N(int64(30 * 24 * time.Hour)))).Truncate(time.Second),
		}
		for k := r.IntN(4); k > 0; k-- {
			it.Skills = append(it.Skills, 1000+r.IntN(9000))
		}
		out[i] = it
	}
	return out
}
