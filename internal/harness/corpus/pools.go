package corpus

// Word and phrase pools. Sentences are assembled from them with a seeded
// RNG, so the text repeats the way a site's own vocabulary does (and
// compresses like real prose) without being one paragraph copied around.

var jaSubjects = []string{
	"日本銀行は", "政府は", "金融庁は", "財務省は", "東京証券取引所は", "トヨタ自動車は", "ソニーグループは",
	"三菱UFJフィナンシャル・グループは", "ソフトバンクグループは", "任天堂は", "ファーストリテイリングは",
	"日経平均株価は", "東証株価指数（TOPIX）は", "米連邦準備制度理事会（FRB）は", "欧州中央銀行（ECB）は",
	"大手証券会社のアナリストは", "個人投資家の多くは", "市場関係者は", "複数の関係者によると、同社は",
	"総務省の統計によると、家計は", "民間シンクタンクは", "国内の大手銀行は", "地方銀行の一部は",
	"ネット証券各社は", "楽天証券は", "SBI証券は", "マネックス証券は", "生命保険各社は", "不動産投資信託（REIT）市場は",
	"円相場は", "長期金利は", "原油先物は", "金（ゴールド）価格は", "ビットコインは", "米国株式市場は",
}

var jaObjects = []string{
	"政策金利の据え置きを", "追加利上げの可能性を", "新NISAの成長投資枠の拡充を", "iDeCoの拠出限度額の引き上げを",
	"今期の業績見通しの上方修正を", "自社株買いの実施を", "配当予想の増額を", "中期経営計画の見直しを",
	"住宅ローン金利の引き上げを", "インデックスファンドの信託報酬の引き下げを", "外貨預金の金利キャンペーンを",
	"ESG投資の開示ルールを", "暗号資産の税制改正を", "物価高への対策を", "賃上げの動向を", "半導体関連株の売買を",
	"高配当株への投資を", "米国債の利回り上昇を", "為替介入の可能性を", "企業年金の運用方針を",
	"ポイント投資の新サービスを", "つみたて投資枠の商品ラインナップを", "不動産価格の上昇を", "銀行預金の金利を",
}

var jaVerbs = []string{
	"発表した。", "決定した。", "明らかにした。", "検討していると述べた。", "慎重に見極める姿勢を示した。",
	"強く意識している。", "注視している。", "前向きに評価した。", "懸念材料として挙げた。", "市場予想を上回った。",
	"市場予想を下回った。", "相次いで打ち出している。", "背景に上昇した。", "受けて下落した。", "正式に表明した。",
	"来月にも開始する見通しだ。", "年内に判断するとみられる。", "巡り議論が続いている。", "重視する考えを示した。",
}

var jaConnectors = []string{
	"一方で、", "また、", "さらに、", "これに対し、", "その結果、", "ただし、", "同時に、", "こうした中、",
	"専門家の間では、", "関係者によると、", "前年同期と比べると、", "長期的に見れば、", "", "", "",
}

var jaFacts = []string{
	"前年比%d.%d%%増となった。", "前年同月比で%d.%d%%減少した。", "1ドル=%d円台で推移している。",
	"終値は前日比%d円高の%d円だった。", "売上高は%d億円、営業利益は%d億円だった。", "利回りは%d.%d%%に上昇した。",
	"申込件数は%d万件を超えた。", "口座数は%d万口座に達した。", "時価総額は約%d兆円となった。",
	"平均年収は%d万円だった。", "積立額の平均は月%d万円だった。", "対象となる世帯は約%d万世帯に上る。",
}

var jaAdvice = []string{
	"投資にはリスクが伴うため、余裕資金で行うことが大切です。", "長期・積立・分散を意識することで、値動きのリスクを抑えられます。",
	"手数料や信託報酬は運用成績に直接影響するため、事前に確認しておきましょう。", "生活防衛資金として、生活費の半年分程度を預金で確保しておくと安心です。",
	"税制優遇制度を活用すれば、運用益にかかる約20%の税金を節約できます。", "目先の値動きに一喜一憂せず、計画的に続けることが重要です。",
	"金利が上昇する局面では、変動金利型のローンの返済額が増える可能性があります。", "為替の変動によって、外貨建て資産の円換算額は大きく変わります。",
}

var enSubjects = []string{
	"The Bank of Japan", "The Federal Reserve", "Toyota Motor", "Sony Group", "SoftBank Group", "Mitsubishi UFJ",
	"The Nikkei 225", "The TOPIX index", "Retail investors", "Analysts at major brokerages", "The finance ministry",
	"Japanese households", "Regional banks", "Foreign investors", "Online brokerages", "Life insurers",
	"The yen", "Ten-year government bond yields", "Crude oil futures", "Gold prices", "Bitcoin", "Wall Street",
	"The European Central Bank", "Chipmakers", "Real estate investment trusts", "Pension funds",
}

var enVerbs = []string{
	"raised", "cut", "held steady on", "announced", "reviewed", "weighed", "signalled support for", "warned about",
	"reported", "beat expectations on", "missed forecasts on", "doubled down on", "scaled back", "unveiled",
	"is reconsidering", "pointed to", "flagged risks in", "welcomed",
}

var enObjects = []string{
	"its policy rate", "the outlook for inflation", "a share buyback programme", "its dividend forecast",
	"the new NISA tax-free accounts", "fees on index funds", "mortgage rates", "quarterly earnings",
	"its medium-term business plan", "capital spending on semiconductors", "wage negotiations", "currency intervention",
	"exposure to U.S. Treasuries", "sustainable investment disclosures", "household savings", "the property market",
	"demand for high-dividend stocks", "a new points-based investment service",
}

var enTails = []string{
	"amid uncertainty over global growth.", "as the yen weakened against the dollar.", "after a strong quarter.",
	"despite pressure from investors.", "according to people familiar with the matter.", "in a statement on Tuesday.",
	"for the first time in %d years.", "by %d.%d percentage points.", "to %d.%d%%.", "ahead of the fiscal year-end.",
	"while markets priced in further tightening.", "citing higher costs.", "as trading volumes climbed %d%%.",
	"in line with market expectations.", "in a move that surprised economists.",
}

var enQuotes = []string{
	"We will keep monitoring the data carefully", "It is too early to declare victory over inflation",
	"Long-term investors should not react to short-term swings", "The balance sheet is stronger than it has been in a decade",
	"Our customers want lower fees and simpler products", "Wages need to keep rising for the cycle to be sustainable",
	"We see room for further returns to shareholders", "Volatility is likely to stay elevated for some time",
}

var enNames = []string{
	"Kenji Tanaka", "Yuki Sato", "Hiroshi Suzuki", "Aiko Watanabe", "Daisuke Ito", "Emily Carter", "James Walker",
	"Sarah Kim", "Takumi Yamamoto", "Mei Nakamura", "Ryo Kobayashi", "Hannah Lee", "David Chen", "Naoko Kato",
}

var jaNames = []string{
	"田中 健司", "佐藤 由紀", "鈴木 浩", "渡辺 愛子", "伊藤 大輔", "山本 拓海", "中村 芽衣", "小林 亮", "加藤 直子",
	"吉田 誠", "山田 花子", "松本 翔太", "井上 美咲", "木村 達也",
}

var jaRoles = []string{
	"ファイナンシャルプランナー（CFP）", "元証券会社アナリスト", "経済ジャーナリスト", "編集部記者", "税理士",
	"日本証券アナリスト協会認定アナリスト", "不動産コンサルタント", "マネーライター",
}

var jaBioTails = []string{
	"大手証券会社で個人向け資産運用のアドバイスに10年以上携わる。", "新聞社の経済部で金融政策や市場を担当した後、独立。",
	"家計の見直しや老後資金の相談を年間200件以上受けている。", "著書に『はじめての資産運用』『新NISA完全ガイド』など。",
	"テレビやラジオの経済番組にも出演している。", "難しいお金の話をわかりやすく伝えることをモットーとしている。",
}

var categories = []struct{ Slug, Name string }{
	{"markets", "マーケット"}, {"investing", "資産運用"}, {"nisa", "NISA・iDeCo"}, {"banking", "銀行・預金"},
	{"insurance", "保険"}, {"real-estate", "不動産"}, {"economy", "経済"}, {"crypto", "暗号資産"},
	{"tax", "税金"}, {"career", "キャリア・年収"},
}

var tagPool = []string{
	"新NISA", "iDeCo", "日銀", "金利", "円安", "株式投資", "投資信託", "高配当株", "米国株", "ETF", "REIT",
	"住宅ローン", "ふるさと納税", "確定申告", "老後資金", "インフレ", "半導体", "決算", "FRB", "ビットコイン",
	"interest-rates", "yen", "earnings", "index-funds", "dividends", "mortgage", "inflation", "fintech",
}

var captions = []string{
	"記者会見する総裁（東京都中央区）", "東京証券取引所の株価ボード", "日本銀行本店", "スマートフォンで取引する個人投資家",
	"決算説明会で話す社長", "円相場を示すモニター", "Trading floor in Tokyo", "Shoppers in Ginza",
	"The central bank's headquarters", "住宅展示場の様子", "資産運用セミナーの会場",
}

var credits = []string{"編集部撮影", "ロイター", "共同通信", "Getty Images", "PIXTA", "AFP"}

var itemNames = []string{
	"Flame Sword", "Ice Lance", "Thunder Bow", "Healing Potion", "Mana Crystal", "Dragon Scale", "Ancient Coin",
	"炎の剣", "氷の槍", "雷の弓", "回復薬", "魔法石", "竜の鱗", "古代の金貨", "経験値ボーナス券", "ガチャチケット",
}

var itemKinds = []string{"weapon", "armor", "consumable", "material", "ticket", "character"}

// Word-level pools: most sentences are assembled from these, so phrases
// rarely repeat verbatim within one article, as in real prose.

var jaNouns = []string{
	"金利", "物価", "賃金", "景気", "為替", "株価", "債券", "預金", "融資", "住宅", "年金", "保険", "税制", "家計", "企業",
	"業績", "利益", "売上", "配当", "投資", "資産", "運用", "市場", "需要", "供給", "輸出", "輸入", "消費", "雇用", "人口",
	"地方", "都市", "銀行", "証券", "信託", "基金", "政策", "制度", "規制", "改革", "予算", "国債", "外貨", "通貨", "資金",
	"残高", "口座", "手数料", "報酬", "利回り", "指数", "相場", "取引", "決済", "電子", "技術", "半導体", "自動車", "電力",
	"エネルギー", "原材料", "不動産", "土地", "建設", "観光", "小売", "外食", "物流", "通信", "医療", "介護", "教育", "子育て",
	"老後", "相続", "贈与", "副業", "転職", "年収", "貯蓄", "節約", "ポイント", "キャッシュレス", "クレジットカード", "スマホ",
	"アプリ", "サービス", "プラン", "ファンド", "インデックス", "ポートフォリオ", "リスク", "リターン", "コスト", "シェア",
	"見通し", "水準", "動向", "影響", "要因", "背景", "課題", "対策", "効果", "負担", "支援", "拡大", "縮小", "回復",
	"減速", "上昇", "下落", "調整", "変動", "推移", "成長", "安定", "格差", "構造", "戦略", "方針", "計画", "目標",
}

var jaVerbEnds = []string{
	"が続いている", "を押し上げた", "を押し下げた", "に影響した", "が注目されている", "を見直す動きが広がった", "が懸念される",
	"を発表した", "を検討している", "が明らかになった", "を下支えした", "が鮮明になった", "に転じた", "を上回った", "を下回った",
	"が期待されている", "を後押しする", "が課題となっている", "を重視している", "に直結する", "を抑える狙いがある",
	"が加速している", "を迫られている", "は限定的だ", "が急務だ", "を示している", "が相次いだ", "を警戒している",
}

var jaParticles = []string{"の", "の", "や", "と", "による", "に関する", "をめぐる", "に伴う"}

var jaTimes = []string{
	"今年に入り、", "足元では、", "先月以降、", "年明けから、", "この1年で、", "今後数年間は、", "前回の会合以降、",
	"コロナ禍以降、", "直近の決算では、", "昨年度は、", "", "", "", "",
}

var enNouns = []string{
	"rates", "inflation", "wages", "growth", "exports", "imports", "demand", "supply", "earnings", "revenue", "margins",
	"dividends", "buybacks", "bonds", "yields", "equities", "funds", "fees", "savings", "deposits", "loans", "mortgages",
	"pensions", "insurance", "taxes", "subsidies", "budgets", "debt", "credit", "liquidity", "volatility", "currency",
	"the yen", "the dollar", "chips", "batteries", "automakers", "retailers", "banks", "brokerages", "insurers",
	"households", "consumers", "companies", "exporters", "regulators", "lawmakers", "policymakers", "shareholders",
	"tourism", "housing", "energy", "commodities", "shipping", "semiconductors", "software", "payments", "startups",
}

var enAdjs = []string{
	"higher", "lower", "weaker", "stronger", "record", "steady", "sluggish", "robust", "modest", "sharp", "gradual",
	"unexpected", "domestic", "global", "regional", "long-term", "short-term", "quarterly", "annual", "fresh",
	"persistent", "tighter", "looser", "rising", "falling", "volatile", "resilient", "fragile",
}

var enVerbs2 = []string{
	"lifted", "weighed on", "pushed up", "dragged down", "supported", "offset", "outpaced", "lagged", "boosted",
	"squeezed", "reshaped", "tested", "stalled", "revived", "eroded", "cushioned", "accelerated", "slowed",
}

var enPreps = []string{"in", "across", "for", "among", "despite", "amid", "alongside", "ahead of", "after", "before"}
