//! tokio-many: a few hundred distinct future types, each spawned as its own
//! task, so that `raw::poll` has hundreds of instances: what a large server
//! looks like to a tracer that probes every one of them.
//!
//! usage: tokio-many [--duration SECS]

use std::time::{Duration, Instant};

macro_rules! futures {
    ($($name:ident $size:literal)*) => {
        mod futures {
            use std::time::Duration;
            $(
                /// One distinct future type: a short sleep, a little work, again.
                /// Real futures differ in what they hold across an await; so do
                /// these (a box of $size bytes), or their code, down to what drops
                /// them, would be one and the same.
                pub async fn $name(until: std::time::Instant) -> u64 {
                    let mut state = Box::new([0u8; $size]);
                    let mut n = 0u64;
                    while std::time::Instant::now() < until {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        for (i, b) in state.iter_mut().enumerate() {
                            *b = b.wrapping_add(i as u8);
                            n = n.wrapping_mul(31).wrapping_add(*b as u64);
                        }
                    }
                    n
                }
            )*
        }

        fn spawn_all(until: Instant) -> Vec<tokio::task::JoinHandle<u64>> {
            vec![$(tokio::spawn(futures::$name(until))),*]
        }
    };
}

futures! {
    f000 1 f001 2 f002 3 f003 4 f004 5 f005 6 f006 7 f007 8 f008 9 f009 10 f010 11 f011 12 f012
    13 f013 14 f014 15 f015 16 f016 17 f017 18 f018 19 f019 20 f020 21 f021 22 f022 23 f023 24
    f024 25 f025 26 f026 27 f027 28 f028 29 f029 30 f030 31 f031 32 f032 33 f033 34 f034 35 f035
    36 f036 37 f037 38 f038 39 f039 40 f040 41 f041 42 f042 43 f043 44 f044 45 f045 46 f046 47
    f047 48 f048 49 f049 50 f050 51 f051 52 f052 53 f053 54 f054 55 f055 56 f056 57 f057 58 f058
    59 f059 60 f060 61 f061 62 f062 63 f063 64 f064 65 f065 66 f066 67 f067 68 f068 69 f069 70
    f070 71 f071 72 f072 73 f073 74 f074 75 f075 76 f076 77 f077 78 f078 79 f079 80 f080 81 f081
    82 f082 83 f083 84 f084 85 f085 86 f086 87 f087 88 f088 89 f089 90 f090 91 f091 92 f092 93
    f093 94 f094 95 f095 96 f096 97 f097 98 f098 99 f099 100 f100 101 f101 102 f102 103 f103 104
    f104 105 f105 106 f106 107 f107 108 f108 109 f109 110 f110 111 f111 112 f112 113 f113 114
    f114 115 f115 116 f116 117 f117 118 f118 119 f119 120 f120 121 f121 122 f122 123 f123 124
    f124 125 f125 126 f126 127 f127 128 f128 129 f129 130 f130 131 f131 132 f132 133 f133 134
    f134 135 f135 136 f136 137 f137 138 f138 139 f139 140 f140 141 f141 142 f142 143 f143 144
    f144 145 f145 146 f146 147 f147 148 f148 149 f149 150 f150 151 f151 152 f152 153 f153 154
    f154 155 f155 156 f156 157 f157 158 f158 159 f159 160 f160 161 f161 162 f162 163 f163 164
    f164 165 f165 166 f166 167 f167 168 f168 169 f169 170 f170 171 f171 172 f172 173 f173 174
    f174 175 f175 176 f176 177 f177 178 f178 179 f179 180 f180 181 f181 182 f182 183 f183 184
    f184 185 f185 186 f186 187 f187 188 f188 189 f189 190 f190 191 f191 192 f192 193 f193 194
    f194 195 f195 196 f196 197 f197 198 f198 199 f199 200
}

fn main() {
    let mut duration = 5.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--duration" => {
                duration = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| {
                        eprintln!("tokio-many: --duration needs seconds");
                        std::process::exit(2)
                    })
            }
            _ => {
                eprintln!("usage: tokio-many [--duration SECS]");
                std::process::exit(2)
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("tokio-many: pid {}", std::process::id());
    let until = Instant::now() + Duration::from_secs_f64(duration);
    let done: usize = rt.block_on(async move {
        let mut done = 0;
        for h in spawn_all(until) {
            h.await.expect("task");
            done += 1;
        }
        done
    });
    println!("tokio-many: tasks={}", done);
}
