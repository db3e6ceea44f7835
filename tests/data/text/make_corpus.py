#!/usr/bin/env python3
"""Generate the tokenizer test corpus: tests/data/text/train.txt and heldout.txt.

train.txt (about 4,000 lines) is text to train small reference tokenizers on;
heldout.txt (5,300 lines) is drawn from the same mix with different random
draws and is what the tokenizer tests encode. The mix is deliberately awkward
for tokenizers: English with contractions in several letter cases, a dozen
other scripts (including combining marks and scripts without spaces), numbers
in many shapes and Unicode digit forms, runs of spaces and tabs, source code,
URLs, e-mail addresses and multi-code-point emoji sequences.

Every word list and template below was written for this file. The output is
deterministic (standard library only, fixed seeds). Both output files are
checked in; after editing this script, regenerate them from the repository
root with:

    python3 tests/data/text/make_corpus.py
"""

import random
from pathlib import Path

TRAIN_LINES = 4000
HELDOUT_LINES = 5300
TRAIN_SEED = 0x5EED_0001
HELDOUT_SEED = 0x5EED_0002
MAX_LINE_CHARS = 200

# --------------------------------------------------------------------------
# English: slot-filled templates. Contractions are spread over the templates
# and the words so that every common form shows up, then a later pass changes
# the letter case of some lines ("WE'LL", "I'M", "It's").
# --------------------------------------------------------------------------

NAMES = ["Alice", "Bob", "Priya", "Mateo", "Yuki", "Olumide", "Greta", "Sam",
         "Dr. Okafor", "Mrs. Lindqvist", "Jamal", "Ines", "Theo", "Marguerite",
         "Kofi", "Hannah", "Ravi", "Lena", "O'Brien", "McAllister"]
NOUNS = ["kettle", "bicycle", "spreadsheet", "garden", "compiler", "umbrella",
         "lighthouse", "sandwich", "violin", "server", "notebook", "river",
         "train", "kernel", "ladder", "window", "recipe", "parcel", "meeting",
         "guitar", "library", "tokenizer", "matrix", "harbour", "cathedral",
         "password", "tram", "orchard", "microscope", "battery"]
ADJECTIVES = ["quiet", "enormous", "broken", "shiny", "ancient", "slow",
              "brilliant", "muddy", "crooked", "fragile", "noisy", "purple",
              "half-finished", "well-known", "cheap", "stubborn", "warm",
              "peculiar", "tiny", "overdue"]
VERBS = ["fix", "paint", "borrow", "measure", "deliver", "rewrite", "carry",
         "forget", "test", "sell", "polish", "find", "return", "explain",
         "benchmark", "clean", "photograph", "assemble", "inspect", "tune"]
PLACES = ["the station", "Grandma's house", "the lab", "downtown",
          "the top floor", "Lisbon", "the old mill", "the office",
          "the night market", "the harbour", "Mike's garage", "the archive"]
TIMES = ["tomorrow", "on Tuesday", "at noon", "next week", "tonight",
         "before lunch", "after the storm", "in March", "by Friday",
         "this morning", "around midnight", "later"]
ADVERBS = ["really", "probably", "honestly", "never", "always", "barely",
           "quite", "definitely", "sort of", "almost"]

# Each template is a sentence; {n} is a small number, {N} a capitalised name.
ENGLISH_TEMPLATES = [
    "I'm {adv} going to {verb} the {noun} {time}.",
    "Don't {verb} the {adj} {noun} without asking {N} first.",
    "It's {adv} {adj}, isn't it?",
    "We'll {verb} it at {n} o'clock, won't we?",
    "They'd {adv} rather {verb} the {noun} at {place}.",
    "You've {adv} seen a {adj} {noun} before, haven't you?",
    "{N} said she'd {verb} the {noun} {time}.",
    "He's got a {adj} {noun} and he can't {verb} it.",
    "We're meeting at {place} {time}; don't be late!",
    "That's the {noun} {N}'s been talking about.",
    "I've told you {n} times: it doesn't {verb} itself.",
    "Who'd have thought the {noun} was so {adj}?",
    "Let's {verb} the {noun} and call it a day.",
    "You're {adv} right, the {noun} isn't {adj} anymore.",
    "The {noun}'s handle is {adj}, so we couldn't {verb} it.",
    "I'd {verb} the {noun} if I weren't so tired.",
    "They've played rock'n'roll at {place} since {n} o'clock.",
    "{N} wasn't sure whether we'd {verb} the {noun} in time.",
    "Shouldn't we {verb} the {adj} {noun} {time}?",
    "It'll be {adj}, but that's fine by me.",
    "She'll {verb} the {noun}; he'll {verb} the other one.",
    "Y'all won't believe how {adj} the {noun} looks.",
    "The kids' {noun} and the teachers' {noun} got mixed up.",
    "Ma'am, you'll need to {verb} your {noun} at {place}.",
    "What's the point if nobody's going to {verb} it?",
    "I'm not saying it's {adj}; I'm saying it's {adv} {adj}.",
    "Where've you been? We've waited since {n} o'clock!",
    "The {n} {noun}s we'd ordered still haven't arrived.",
    "Mustn't forget: {verb} the {noun}, then {verb} the other {noun}.",
    "Nobody'd {verb} a {noun} that {adj}, would they?",
    "{N}: \"I can't {verb} the {noun}.\" {N}: \"Why not?\"",
    "Honestly, it's {n} degrees outside and we're out of ice.",
    "'Tis the season to {verb} {adj} {noun}s.",
    "If you'd asked, I'd've helped you {verb} it.",
    "OK -- here's the plan: {verb}, {verb}, then {verb}.",
    "Pages {n}-{n} explain how to {verb} the {noun}.",
]

# A handful of whole sentences that don't fit the templates above.
ENGLISH_EXTRA = [
    "The quick brown fox jumps over the lazy dog.",
    "Well... that didn't go as planned.",
    "\"Quoted text,\" she said, 'and single quotes too.'",
    "Is this the real life? Is this just fantasy?",
    "e.g. this, i.e. that, etc. -- and so on.",
    "Mr. and Mrs. Smith aren't home; they're in St. Ives.",
    "A 3-D printer, a 2x4 and 12 in. of tape.",
    "Our café’s naïve façade won’t fool anyone.",
    "He said “hello” and left – without a word.",
    "WARNING: DO NOT REMOVE THIS LABEL UNDER PENALTY OF LAW.",
]


def case_variant(rng, text):
    """Usually leave the text alone; sometimes shout it, whisper it or Title It."""
    r = rng.random()
    if r < 0.10:
        return text.upper()
    if r < 0.16:
        return text.lower()
    if r < 0.21:
        return text.title()
    return text


def curly_quotes(rng, text):
    """Some writers use the typographic apostrophe (U+2019) instead of '."""
    return text.replace("'", "\u2019") if rng.random() < 0.07 else text


def english_sentence(rng):
    if rng.random() < 0.12:
        return rng.choice(ENGLISH_EXTRA)
    template = rng.choice(ENGLISH_TEMPLATES)
    out = []
    i = 0
    # Fill each slot independently so a template with two {noun}s gets two.
    while i < len(template):
        if template[i] == "{":
            j = template.index("}", i)
            slot = template[i + 1:j]
            if slot == "n":
                out.append(str(rng.choice([1, 2, 3, 5, 7, 9, 10, 11, 12, 20, 42, 99, 365, 1000])))
            elif slot == "N":
                out.append(rng.choice(NAMES))
            else:
                out.append(rng.choice({"adv": ADVERBS, "verb": VERBS, "noun": NOUNS,
                                       "adj": ADJECTIVES, "place": PLACES,
                                       "time": TIMES}[slot]))
            i = j + 1
        else:
            out.append(template[i])
            i += 1
    text = "".join(out)
    return text[0].upper() + text[1:]


def english_line(rng):
    count = rng.choice([1, 2, 2, 3, 3, 4])
    text = " ".join(english_sentence(rng) for _ in range(count))
    return curly_quotes(rng, case_variant(rng, text))


# --------------------------------------------------------------------------
# Other languages: short phrases, joined one to three per line.
# --------------------------------------------------------------------------

LANGUAGES = {
    "de": [
        "Die Straße ist heute sehr ruhig.",
        "Ich hätte gern ein Stück Käsekuchen, bitte.",
        "Über die alte Brücke fließt kaum noch Wasser.",
        "Das Mädchen läuft schnell zur Bäckerei.",
        "Wir müssen morgen früh um sechs aufstehen.",
        "Herzliche Grüße aus München und Köln!",
        "Der Fußball rollt über die nasse Wiese.",
        "Das Zimmer ist größer, als ich dachte.",
        "Könnten Sie mir bitte kurz helfen?",
        "Er heißt Jürgen und wohnt in Düsseldorf.",
        "Übermorgen öffnet das neue Geschäft am Marktplatz.",
        "Das Frühstück war außergewöhnlich gut.",
        "Wir wären gern noch länger geblieben.",
        "Gemütlichkeit lässt sich schwer übersetzen.",
        "Die Äpfel im Garten sind dieses Jahr süß.",
        "Schließlich hat der Zug doch noch gehalten.",
        "Bitte prüfen Sie die Maße und das Gewicht.",
    ],
    "fr": [
        "Ça va très bien, merci beaucoup.",
        "Où se trouve la gare, s'il vous plaît ?",
        "L'été dernier, nous sommes allés à la mer.",
        "Le garçon a commandé une crème brûlée.",
        "J'ai déjà vu ce film deux fois.",
        "C'est la fête au village ce week-end !",
        "Il faut être à l'heure demain matin.",
        "Les élèves écoutent le professeur en silence.",
        "Qu'est-ce que tu fais aujourd'hui ?",
        "Noël approche et la forêt est enneigée.",
        "Je préfère le thé au café, à vrai dire.",
        "Il était une fois un château très ancien.",
        "Où est passée ma clé ? Je l'avais là.",
        "Le cœur a ses raisons ; la raison, non.",
        "Voilà, c'est réglé : à bientôt !",
    ],
    "es": [
        "¿Dónde está la biblioteca?",
        "¡Qué día tan bonito hace hoy!",
        "El niño comió piña en la montaña.",
        "Mañana vamos a la playa con mis amigos.",
        "La canción del año pasado era muy pegadiza.",
        "¿Cuántos años tienes?",
        "¡Feliz cumpleaños, señora Muñoz!",
        "El pingüino nada en el agua fría.",
        "Me gustaría un café con leche, por favor.",
        "La música está demasiado alta, ¿no crees?",
        "Él llegó tarde porque perdió el autobús.",
        "¡Ojalá llueva café en el campo!",
        "Según el pronóstico, mañana hará sol.",
    ],
    "ru": [
        "Привет, как дела?",
        "Сегодня на улице очень холодно.",
        "Я люблю читать книги по вечерам.",
        "Москва — столица России.",
        "Мы встретимся завтра в десять часов.",
        "Съешь же ещё этих мягких французских булок.",
        "Кошка спит на тёплом подоконнике.",
        "Где находится ближайшая станция метро?",
        "Спасибо большое за вашу помощь!",
        "Программа работает быстро и надёжно.",
        "Ёлка стоит в углу и мигает огнями.",
        "Объём памяти: ПЗУ и ОЗУ.",
    ],
    "el": [
        "Καλημέρα, τι κάνεις;",
        "Η θάλασσα είναι πολύ ζεστή σήμερα.",
        "Ευχαριστώ πολύ για τη βοήθεια.",
        "Το σπίτι μας βρίσκεται κοντά στην πλατεία.",
        "Αγαπώ τα ελληνικά νησιά.",
        "Ο καιρός αλλάζει γρήγορα το φθινόπωρο.",
        "Πού είναι ο σταθμός\u037e",
        "Η Αθήνα έχει πολλά μουσεία.",
        "ΚΑΛΗ ΧΡΟΝΙΑ ΣΕ ΟΛΟΥΣ!",
        "Ο αριθμός π είναι περίπου 3,14.",
    ],
    "ar": [
        "مرحبا بكم في المدينة.",
        "كيف حالك اليوم؟",
        "أنا أحب القراءة كثيرا.",
        "الطقس جميل في الصباح.",
        "شكرا جزيلا على المساعدة.",
        "هذا الكتاب مفيد جدا.",
        "نلتقي غدا في الساعة العاشرة.",
        "البيت قريب من البحر.",
        # Fully vowelled: every letter carries a combining diacritic.
        "كَتَبَ الوَلَدُ الدَّرْسَ بِعِنَايَةٍ.",
        "السَّلَامُ عَلَيْكُمْ",
    ],
    "he": [
        "שלום, מה שלומך?",
        "היום יום יפה מאוד.",
        "אני גר בירושלים כבר שנים.",
        "תודה רבה על העזרה.",
        "הספר נמצא על השולחן.",
        "אנחנו נפגשים מחר בבוקר.",
        "הים כחול ושקט הערב.",
        # Pointed Hebrew (niqqud are combining marks).
        "בְּרֵאשִׁית",
    ],
    "hi": [
        "नमस्ते, आप कैसे हैं?",
        "मुझे हिन्दी किताबें पढ़ना पसंद है।",
        "आज मौसम बहुत अच्छा है।",
        "हम कल सुबह दिल्ली जाएँगे।",
        "यह कंप्यूटर बहुत तेज़ चलता है।",
        "धन्यवाद, फिर मिलेंगे।",
        "बच्चे बगीचे में खेल रहे हैं।",
        "पानी पीना स्वास्थ्य के लिए ज़रूरी है।",
        "क्या आप मेरी मदद कर सकते हैं?",
        "स्टेशन यहाँ से दो किलोमीटर दूर है।",
    ],
    "zh": [
        "今天天气很好，我们去公园散步吧。",
        "我喜欢学习新的编程语言。",
        "这本书非常有意思。",
        "北京是中国的首都。",
        "请问，火车站怎么走？",
        "他每天早上七点起床。",
        "我们的模型在测试中表现良好。",
        "谢谢你的帮助！",
        "春天来了，花都开了。",
        "这个问题需要仔细思考。",
        "這個軟體運行得很順利。",
        "内存不足，请关闭其他程序后重试。",
        "《红楼梦》是一部长篇小说。",
    ],
    "ja": [
        "こんにちは、元気ですか？",
        "東京は大きな都市です。",
        "私は毎朝コーヒーを飲みます。",
        "今日はとても暑いですね。",
        "この本はとても面白かったです。",
        "駅までどのくらいかかりますか？",
        "ありがとうございました。",
        "コンピューターのメモリが足りません。",
        "週末に友達と映画を見に行きました。",
        "「すみません」と彼は言った。",
        "ｶﾀｶﾅの半角文字もたまに出てきます。",
        "ラーメンを食べたい！",
    ],
    "ko": [
        "안녕하세요, 만나서 반갑습니다.",
        "오늘 날씨가 정말 좋네요.",
        "저는 서울에 살고 있어요.",
        "이 음식은 정말 맛있어요.",
        "내일 아침에 회의가 있습니다.",
        "감사합니다!",
        "한국어를 공부하는 것은 재미있어요.",
        "지하철역이 어디에 있나요?",
        "컴퓨터가 갑자기 꺼졌어요.",
    ],
    "th": [
        "สวัสดีครับ ยินดีที่ได้รู้จัก",
        "วันนี้อากาศร้อนมาก",
        "ฉันชอบกินข้าวผัดกุ้ง",
        "ขอบคุณมากค่ะ",
        "กรุงเทพฯ เป็นเมืองหลวงของประเทศไทย",
        "พรุ่งนี้เราจะไปตลาดน้ำกัน",
        "คอมพิวเตอร์เครื่องนี้เร็วมาก",
    ],
    # A few more Latin-script languages with their own diacritics.
    "misc": [
        "Tiếng Việt có rất nhiều dấu thanh.",
        "Hà Nội và Thành phố Hồ Chí Minh.",
        "İstanbul'da hava bugün çok güzel.",
        "Işık ılık, süt ılık.",
        "Zażółć gęślą jaźń.",
        "Příliš žluťoučký kůň úpěl ďábelské ódy.",
        "Hyvää huomenta, mitä kuuluu?",
        "Smørrebrød og æblekage på Ærø.",
        "Ég tala smá íslensku.",
        "Não há nada como um pão de queijo.",
    ],
}
LANGUAGE_KEYS = list(LANGUAGES)


# Chinese and Japanese put no spaces between words; their salad lines are
# cut from the phrases at fixed offsets, which is safe because Han and kana
# carry no combining marks. Thai has no spaces either but does have combining
# vowel and tone marks, so its words are listed by hand (and spaced, as Thai
# separates phrases with spaces).
UNSPACED = {"zh", "ja"}
THAI_WORDS = ["สวัสดี", "ครับ", "ค่ะ", "วันนี้", "อากาศ", "ร้อน", "มาก", "ฉัน", "ชอบ",
              "กิน", "ข้าวผัด", "กุ้ง", "ขอบคุณ", "กรุงเทพฯ", "เมืองหลวง", "ของ",
              "ประเทศไทย", "พรุ่งนี้", "เรา", "จะ", "ไป", "ตลาดน้ำ", "คอมพิวเตอร์",
              "เครื่อง", "นี้", "เร็ว", "ยินดี", "ที่", "ได้", "รู้จัก"]
# Characters stripped from phrase ends when cutting phrases into words.
PHRASE_PUNCT = ".,!?;:¿¡。，！？、「」《》\u037e\u0964"


def language_words(lang):
    """Cut the phrases of one language into word-sized pieces."""
    if lang == "th":
        return THAI_WORDS
    words = []
    for phrase in LANGUAGES[lang]:
        if lang in UNSPACED:
            text = "".join(c for c in phrase if c not in PHRASE_PUNCT and c != " ")
            words += [text[i:i + 3] for i in range(0, len(text), 3)]
        else:
            words += [w.strip(PHRASE_PUNCT) for w in phrase.split(" ")]
    return [w for w in words if w]


LANGUAGE_WORDS = {lang: language_words(lang) for lang in LANGUAGES}


def language_line(rng, lang=None):
    lang = lang or rng.choice(LANGUAGE_KEYS)
    if rng.random() < 0.4:
        # Word salad: the same words in new orders, so the line isn't a repeat.
        words = [rng.choice(LANGUAGE_WORDS[lang]) for _ in range(rng.randint(4, 18))]
        sep = "" if lang in UNSPACED else " "
        end = rng.choice(["。", "！", "？", ""] if lang in UNSPACED else ["", ".", "!", "?", ",", "…"])
        return sep.join(words) + end
    phrases = LANGUAGES[lang]
    count = rng.choice([1, 2, 3, 3, 4, 5])
    return " ".join(rng.choice(phrases) for _ in range(count))


# --------------------------------------------------------------------------
# Numbers.
# --------------------------------------------------------------------------

def digits(rng, lo, hi):
    """A digit string whose length is drawn from [lo, hi], no leading zero."""
    n = rng.randint(lo, hi)
    return str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(n - 1))


def grouped(value, sep=","):
    s = str(value)
    parts = []
    while len(s) > 3:
        parts.append(s[-3:])
        s = s[:-3]
    parts.append(s)
    return sep.join(reversed(parts))


def a_number(rng):
    """One number-like token in one of many everyday formats."""
    kind = rng.randint(0, 19)
    if kind == 0:
        return str(rng.randint(0, 9))
    if kind == 1:
        return str(rng.randint(10, 99))
    if kind == 2:
        return digits(rng, 3, 7)
    if kind == 3:
        return digits(rng, 8, 24)
    if kind == 4:
        return f"{rng.randint(0, 999)}.{digits(rng, 1, 6)}"
    if kind == 5:
        return f"{rng.randint(1970, 2039)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == 6:
        return grouped(rng.randint(1000, 9_999_999_999))
    if kind == 7:
        return rng.choice([f"+1 ({digits(rng, 3, 3)}) {digits(rng, 3, 3)}-{digits(rng, 4, 4)}",
                           f"+49 {digits(rng, 2, 3)} {digits(rng, 6, 8)}",
                           f"555-{rng.randint(0, 9999):04d}",
                           f"(0{rng.randint(1, 9)}) {digits(rng, 4, 4)} {digits(rng, 4, 4)}",
                           f"+81-{rng.randint(1, 99)}-{digits(rng, 4, 4)}-{digits(rng, 4, 4)}"])
    if kind == 8:
        return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}" + (
            f":{rng.randint(0, 59):02d}" if rng.random() < 0.3 else "")
    if kind == 9:
        return f"{rng.randint(0, 100)}.{rng.randint(0, 9)}%"
    if kind == 10:
        cents = rng.randint(0, 99)
        return rng.choice([f"${grouped(rng.randint(1, 99999))}.{cents:02d}",
                           f"€{rng.randint(1, 999)},{cents:02d}",
                           f"{grouped(rng.randint(1000, 999999), '.')},{cents:02d} €",
                           f"¥{rng.randint(100, 99999)}",
                           f"£{rng.randint(1, 500)}"])
    if kind == 11:
        return f"v{rng.randint(0, 12)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"
    if kind == 12:
        return rng.choice(["0x", "0X"]) + "".join(rng.choice("0123456789abcdefABCDEF")
                                                   for _ in range(rng.randint(2, 16)))
    if kind == 13:
        return f"{rng.randint(1, 9)}.{digits(rng, 1, 4)}e{rng.choice(['', '-', '+'])}{rng.randint(1, 40)}"
    if kind == 14:
        return f"-{rng.randint(1, 500)}.{rng.randint(0, 99)}"
    if kind == 15:
        n = rng.randint(1, 130)
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"
    if kind == 16:
        start = rng.randint(1800, 2020)
        return f"{start}–{start + rng.randint(1, 60)}"
    if kind == 17:
        return ".".join(str(rng.randint(0, 255)) for _ in range(4))
    if kind == 18:
        return rng.choice(["3.14159", "2.71828", "1.41421356", "6.02214076e23", "42",
                           "1,000,000", "1234567", "2026-12-04", "0.5", "100", "007"])
    return f"{rng.randint(1, 64)}x{rng.randint(1, 4096)}"


NUMBER_TEMPLATES = [
    "Order #{0} shipped on {1} for {2}.",
    "Call me at {0} after {1}.",
    "The total was {0}, up from {1} last year.",
    "{0} + {1} = {2}",
    "id={0}\tvalue={1}\tts={2}",
    "Row {0}: {1}, {2}, {3}",
    "Version {0} fixes {1} bugs reported since {2}.",
    "Temperature: {0} °C ({1} °F) at {2}",
    "Invoice {0} / {1} / due {2}",
    "Between {0} and {1} there were {2} events.",
    "{0}",
    "[{0}, {1}, {2}, {3}, {4}]",
    "Room {0}, floor {1}, building {2}",
]


def number_line(rng):
    template = rng.choice(NUMBER_TEMPLATES)
    return template.format(*(a_number(rng) for _ in range(5)))


# Numbers that are not ASCII digits: full-width, Roman numerals, super/sub
# scripts, vulgar fractions, circled numbers, other scripts' decimal digits.
DIGIT_SETS = {
    "fullwidth": "０１２３４５６７８９",
    "arabic_indic": "٠١٢٣٤٥٦٧٨٩",
    "persian": "۰۱۲۳۴۵۶۷۸۹",
    "devanagari": "०१२३४५६७८९",
    "thai": "๐๑๒๓๔๕๖๗๘๙",
    "bengali": "০১২৩৪৫৬৭৮৯",
    "math_double_struck": "".join(chr(0x1D7D8 + i) for i in range(10)),
}
UNICODE_NUMBER_BITS = ["Ⅻ", "Ⅳ", "Ⅸ", "ⅷ", "ⅲ", "Ⅿ", "²", "³", "¹", "⁴", "₂", "₀",
                       "½", "¾", "⅓", "⅛", "①", "②", "⑩", "⑳", "❶", "㉑", "〇"]
UNICODE_NUMBER_TEMPLATES = [
    "Chapter {r}, part {d}",
    "x{sup} + y{sup} = z{sup}",
    "Mix {f} cup of flour with {f} cup of milk.",
    "{d}年{m}月{day}日に会いましょう。",
    "الصفحة {d}",
    "Steps: {c} open, {c} read, {c} close",
    "Price {d} — total {d}",
    "H{sub}O and CO{sub}",
    "Louis {r} ruled for {d} years.",
    "{d} {d} {d}",
]


def unicode_number_line(rng):
    digit_set = DIGIT_SETS[rng.choice(list(DIGIT_SETS))]

    def local(n):
        return "".join(digit_set[int(c)] for c in str(n))

    return rng.choice(UNICODE_NUMBER_TEMPLATES).format(
        r=rng.choice(["Ⅻ", "Ⅳ", "Ⅸ", "ⅩⅣ", "Ⅶ", "Ⅱ"]),
        d=local(rng.randint(0, 99999)),
        m=local(rng.randint(1, 12)),
        day=local(rng.randint(1, 28)),
        sup=rng.choice(["²", "³", "⁴", "ⁿ"]),
        sub=rng.choice(["₂", "₃", "₄"]),
        f=rng.choice(["½", "¾", "⅓", "⅔", "¼"]),
        c=rng.choice(["①", "②", "③", "④", "⑤"]),
    ) + (" " + rng.choice(UNICODE_NUMBER_BITS) if rng.random() < 0.3 else "")


# --------------------------------------------------------------------------
# Whitespace-heavy lines.
# --------------------------------------------------------------------------

# Non-ASCII spaces: no-break, em, thin, narrow no-break, ideographic.
ODD_SPACES = ["\u00a0", "\u2003", "\u2009", "\u202f", "\u3000"]


def whitespace_line(rng):
    kind = rng.randint(0, 7)
    if kind == 0:
        # Words separated by runs of 2-8 spaces.
        words = english_sentence(rng).split(" ")
        return "".join(w + " " * rng.randint(1, 8) for w in words[:-1]) + words[-1]
    if kind == 1:
        # Tab-separated fields, some of them empty (two or more fields, so
        # there is always at least one tab).
        fields = [rng.choice(NOUNS + [a_number(rng), ""]) for _ in range(rng.randint(2, 7))]
        return "\t".join(fields) + ("\t" if rng.random() < 0.2 else "")
    if kind == 2:
        # Leading indentation (spaces or tabs) in front of ordinary text.
        indent = rng.choice([" " * rng.randint(1, 16), "\t" * rng.randint(1, 4), "\t  ", "  \t"])
        return indent + rng.choice([english_sentence, language_line])(rng)
    if kind == 3:
        # Trailing spaces / tabs.
        return english_sentence(rng) + rng.choice([" ", "  ", "   ", "\t", " \t", " " * 8])
    if kind == 4:
        # Lines that are nothing but whitespace.
        return rng.choice([" \t", "\t ", " ", "    ", "\t", "\t\t", " \t \t ", " " * 12, "  \t  "])
    if kind == 5:
        # Unusual Unicode spaces between words.
        words = language_line(rng, rng.choice(["fr", "de", "ja", "zh", "ru"])).split(" ")
        return "".join(w + rng.choice(ODD_SPACES + [" "]) for w in words[:-1]) + words[-1]
    if kind == 6:
        # Space runs inside numbers and around punctuation.
        return f"{a_number(rng)}    ,    {a_number(rng)}  ;\t{a_number(rng)} ."
    # Everything at once: leading, inner and trailing runs.
    return (" " * rng.randint(2, 6) + english_sentence(rng) + "\t\t" +
            language_line(rng) + " " * rng.randint(1, 5))


# --------------------------------------------------------------------------
# Source code, data formats, shell, regular expressions.
# --------------------------------------------------------------------------

IDENTIFIERS = ["count", "buffer", "tokens", "rowStride", "n_vocab", "kMaxLen",
               "merge_rank", "scores", "dst", "src", "offset", "pieceId",
               "user_name", "isReady", "tmp2", "__init__", "HTTPClient", "x0"]

CODE_TEMPLATES = [
    # C++
    "#include <{hdr}>",
    "for (int i = 0; i < {n}; ++i) {{",
    "    {id}[i] = {id}[i - 1] + {n};",
    "std::vector<float> {id}({n}, 0.0f);",
    "auto it = {id}.find(\"{word}\");",
    "if ({id} != nullptr && *{id} == '\\0') return -{n};",
    "template <typename T> T clamp(T v, T lo, T hi) {{ return v < lo ? lo : (v > hi ? hi : v); }}",
    "// TODO({name}): handle the {word} case before release",
    "static_assert(sizeof({id}) == {n}, \"unexpected layout\");",
    "}} // namespace switchyard",
    "    std::cout << \"{word}: \" << {id} << '\\n';",
    "constexpr std::uint32_t {id} = 0x{hex}u;",
    "/* {word} */ {id} <<= 2; {id} ^= {id} >> 3;",
    # Python
    "def {id}(self, x: int = {n}) -> list[str]:",
    "    return [s.strip() for s in {id} if s]",
    "        print(f\"{{{id}=}} {word}\")",
    "class {Word}Tokenizer(object):",
    "if __name__ == \"__main__\":",
    "    {id} = {{'a': {n}, \"b\": [{n}, {n}], 'c': None}}",
    "        {id} = lambda k: k ** 2 // {n}",
    "    except (KeyError, ValueError) as e:",
    "            raise RuntimeError(f'bad {word}: {{e!r}}')",
    "@functools.lru_cache(maxsize={n})",
    ">>> {id}[::-1]",
    # JSON and friends
    "{{\"id\": {n}, \"name\": \"{word}\", \"tags\": [\"{word}\", \"{word}\"], \"ok\": true, \"ratio\": 0.{n}}}",
    "  \"{id}\": {{\"enabled\": false, \"limit\": {n}, \"note\": null}},",
    "{id}: [{n}, {n}, {n}]  # yaml",
    "<div class=\"{word}\">{Word} &amp; {word}</div>",
    "| {word} | {n} | {word} |",
    "- [ ] **{Word}** _{word}_ `{id}`",
    # Shell
    "$ cmake --build build -j{n} && ctest --output-on-failure",
    "grep -rn '{word}' src/ | wc -l",
    "export PATH=\"$HOME/.local/bin:$PATH\"",
    "for f in *.txt; do echo \"$f\"; done",
    "sed -E 's/[[:space:]]+$//' {word}.log > {word}.clean",
    "tar -czf {word}-{n}.tar.gz ./{word}/ 2>/dev/null || true",
    # Regex-looking punctuation
    "(?:[a-z]+)\\s*",
    "^\\d{{3}}-\\d{{4}}$",
    "[^\\r\\n\\p{{L}}\\p{{N}}]?\\p{{L}}+",
    "(?<=\\w)'(?=\\w)|\\b[A-Z][a-z]*\\b",
    "re.compile(r\"(\\w+)@(\\w+)\\.com\")",
    "s/\\s+$//g; s/^\\s+//g",
    "!@#$%^&*()_+-=[]{{}}|;':\",./<>?`~",
    "=> -> <= >= != == === && || ?? ::",
]
HEADERS = ["vector", "string", "unordered_map", "cstdint", "algorithm", "memory", "span"]
CODE_WORDS = ["token", "merge", "vocab", "cache", "error", "config", "score",
              "input", "batch", "piece", "stream", "alpha", "kernel"]


def code_line(rng):
    word = rng.choice(CODE_WORDS)
    line = rng.choice(CODE_TEMPLATES).format(
        hdr=rng.choice(HEADERS), n=rng.choice([0, 1, 2, 4, 8, 16, 32, 100, 255, 4096]),
        id=rng.choice(IDENTIFIERS), word=word, Word=word.capitalize(),
        name=rng.choice(["alice", "bob", "kim"]),
        hex="".join(rng.choice("0123456789ABCDEF") for _ in range(8)))
    # Python and C++ bodies sit at several indentation depths.
    if rng.random() < 0.25:
        line = rng.choice(["    ", "        ", "\t", "\t\t", "  "]) + line
    return line


# --------------------------------------------------------------------------
# URLs and e-mail addresses.
# --------------------------------------------------------------------------

DOMAINS = ["example.com", "example.org", "example.net", "test.example.co.uk",
           "docs.example.io", "mail.example.de", "xn--bcher-kva.example"]
PATH_PARTS = ["api", "v1", "v2", "models", "search", "users", "blog", "2026",
              "12", "tokenizer", "README.md", "index.html", "download", "~kim"]


def url_or_email(rng):
    kind = rng.randint(0, 5)
    if kind <= 2:
        scheme = rng.choice(["https://", "http://", "https://www.", "ftp://"])
        path = "/".join(rng.choice(PATH_PARTS) for _ in range(rng.randint(0, 4)))
        url = scheme + rng.choice(DOMAINS) + ("/" + path if path else "")
        if rng.random() < 0.4:
            url += f"?q={rng.choice(CODE_WORDS)}&page={rng.randint(1, 99)}&lang=en-US"
        if rng.random() < 0.2:
            url += "#section-" + str(rng.randint(1, 9))
        if kind == 0:
            return url
        return rng.choice(["See {} for details.", "Link: <{}>", "[docs]({})",
                           "Mirror at {} (updated daily)", "詳しくは {} を参照してください。"]).format(url)
    if kind == 3:
        return rng.choice(["http://localhost:8080/healthz", "http://127.0.0.1:5000/",
                           "file:///home/user/data/train.txt", "https://[::1]:8443/metrics",
                           "ssh://git@example.com:2222/org/repo.git"])
    first = rng.choice(["alice", "bob", "j.doe", "priya.k", "support", "no-reply", "kim_99"])
    email = f"{first}{rng.choice(['', '+tokenizer', '+test', str(rng.randint(1, 999))])}@{rng.choice(DOMAINS)}"
    if kind == 4:
        return email
    return rng.choice(["Contact: {}", "Write to <{}> or call us.", "From: {} (via list)",
                       "E-Mail an {} schicken, bitte."]).format(email)


# --------------------------------------------------------------------------
# Emoji. Multi-code-point sequences are spelled with escapes so the joiners,
# variation selectors and tag characters are visible in this source.
# --------------------------------------------------------------------------

ZWJ = "\u200d"
VS16 = "\ufe0f"
SKIN_TONES = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
SIMPLE_EMOJI = ["😀", "🎉", "🚀", "👍", "🔥", "🌍", "🍕", "🐍", "✨", "☕", "⭐", "✅",
                "🤖", "📦", "🧪", "😂", "🙏", "💡", "🐛", "😅", "🥲", "🫠"]
TONABLE = ["👍", "👋", "🙌", "👏", "🤞", "💪", "\u270c"]
ZWJ_SEQUENCES = [
    ZWJ.join(["\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466"]),  # family
    ZWJ.join(["\U0001F469", "\U0001F4BB"]),                              # woman technologist
    ZWJ.join(["\U0001F9D1", "\U0001F680"]),                              # astronaut
    ZWJ.join(["\U0001F3F3" + VS16, "\U0001F308"]),                       # rainbow flag
    ZWJ.join(["\U0001F468\U0001F3FE", "\U0001F373"]),                    # cook, skin tone
    ZWJ.join(["\U0001F408", "\u2B1B"]),                                  # black cat
    ZWJ.join(["\u2764" + VS16, "\U0001F525"]),                           # heart on fire
]
FLAGS = ["\U0001F1FA\U0001F1F8", "\U0001F1E9\U0001F1EA", "\U0001F1EF\U0001F1F5",
         "\U0001F1EB\U0001F1F7", "\U0001F1E7\U0001F1F7", "\U0001F1EE\U0001F1F3",
         "\U0001F1F0\U0001F1F7",
         # Scotland: black flag + tag letters "gbsct" + cancel tag.
         "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"]
KEYCAPS = [c + VS16 + "\u20e3" for c in "0123456789#*"] + ["7\u20e3"]  # last: no VS16
WITH_VS16 = ["\u2600" + VS16, "\u2714" + VS16, "\u260e" + VS16, "\u2708" + VS16,
             "\u2764" + VS16, "\u263a\ufe0e"]  # the last one asks for text style


def an_emoji(rng):
    kind = rng.randint(0, 5)
    if kind == 0:
        return rng.choice(SIMPLE_EMOJI)
    if kind == 1:
        return rng.choice(TONABLE) + rng.choice(SKIN_TONES)
    if kind == 2:
        return rng.choice(ZWJ_SEQUENCES)
    if kind == 3:
        return rng.choice(FLAGS)
    if kind == 4:
        return rng.choice(KEYCAPS)
    return rng.choice(WITH_VS16)


def emoji_line(rng):
    kind = rng.randint(0, 3)
    if kind == 0:
        return "".join(an_emoji(rng) for _ in range(rng.randint(1, 6)))
    if kind == 1:
        return english_sentence(rng) + " " + an_emoji(rng)
    if kind == 2:
        return an_emoji(rng) + " " + language_line(rng) + " " + an_emoji(rng) + an_emoji(rng)
    return " ".join(f"{an_emoji(rng)} {rng.choice(NOUNS)}" for _ in range(rng.randint(2, 4)))


# --------------------------------------------------------------------------
# Mixed lines: fragments from several generators glued together.
# --------------------------------------------------------------------------

def mixed_line(rng):
    pieces = []
    for _ in range(rng.randint(2, 4)):
        kind = rng.randint(0, 5)
        if kind == 0:
            pieces.append(language_line(rng).split(" ")[0])
        elif kind == 1:
            pieces.append(rng.choice(NOUNS) + rng.choice(["", "'s", "s", "-" + rng.choice(NOUNS)]))
        elif kind == 2:
            pieces.append(a_number(rng))
        elif kind == 3:
            pieces.append(an_emoji(rng))
        elif kind == 4:
            pieces.append(rng.choice(LANGUAGES[rng.choice(LANGUAGE_KEYS)]))
        else:
            pieces.append(rng.choice(IDENTIFIERS))
    # Mostly spaces between fragments, but sometimes none at all (CJK next to
    # Latin next to digits is the interesting case for pre-tokenizers).
    return "".join(p + rng.choice([" ", " ", " ", "", ", ", " - ", "/"]) for p in pieces[:-1]) + pieces[-1]


# --------------------------------------------------------------------------

GENERATORS = [  # (weight, generator)
    (24, english_line),
    (26, language_line),
    (8, number_line),
    (3, unicode_number_line),
    (7, whitespace_line),
    (12, code_line),
    (5, url_or_email),
    (6, emoji_line),
    (9, mixed_line),
]
TOTAL_WEIGHT = sum(w for w, _ in GENERATORS)


def one_line(rng):
    while True:
        pick = rng.randrange(TOTAL_WEIGHT)
        for weight, gen in GENERATORS:
            if pick < weight:
                break
            pick -= weight
        line = gen(rng)
        # Never emit characters that some readers treat as line breaks.
        assert not any(c in line for c in "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"), repr(line)
        if 0 < len(line) <= MAX_LINE_CHARS:
            return line


def write_lines(path, seed, count):
    rng = random.Random(seed)
    lines = [one_line(rng) for _ in range(count)]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def main():
    here = Path(__file__).resolve().parent
    write_lines(here / "train.txt", TRAIN_SEED, TRAIN_LINES)
    write_lines(here / "heldout.txt", HELDOUT_SEED, HELDOUT_LINES)


if __name__ == "__main__":
    main()
